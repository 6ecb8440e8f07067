"""MkDocs hook: the reference pages, generated when the site is built so they cannot drift.

``reference/spec.md`` is made from the JSON Schema of spec files (``schema/envbuilder.schema.json``,
which ``envbuilder schema`` writes and ``tests/cli/test_schema.py`` keeps equal to the code), and
``reference/cli.md`` from the typer app itself: every command, argument and option with its help.
Neither page exists in ``docs/``; ``on_files`` adds them to the build. The two functions that
write them, ``spec_reference`` and ``cli_reference``, need neither MkDocs nor a build: the tests
call them directly (``tests/docs/test_reference.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "envbuilder.schema.json"

SPEC_PAGE = "reference/spec.md"
CLI_PAGE = "reference/cli.md"

# The unions a spec selects by `type:`, by the top-level key that holds them: (section title, anchor).
_UNIONS = {
    "dataset": ("Dataset sources", "dataset-sources"),
    "grader": ("Graders", "graders"),
    "tools": ("Tools", "tools"),
}


# ---------------------------------------------------------------------------------------------
# The spec reference, from the JSON Schema


def spec_reference(schema: dict[str, Any]) -> str:
    """The Markdown of the spec reference: the top level, each union's members, every other block."""
    defs: dict[str, Any] = schema["$defs"]
    top = defs["Spec"]
    lines = [
        "# Spec reference",
        "",
        "Every key a spec file may hold, generated from the JSON Schema of spec files",
        "(`schema/envbuilder.schema.json`, printed by `envbuilder schema`) when this site is built.",
        "A spec that `extends:` another accepts the same keys, all of them optional: its own",
        "values are merged over the base's (mappings merge, other values replace).",
        "",
        "Start a spec with `# yaml-language-server: $schema=../schema/envbuilder.schema.json` for",
        "completion and these descriptions in editors.",
        "",
        "## The top level {#spec}",
        "",
        *_description(top),
        *_table(top, defs),
    ]
    listed = {"Spec"}
    for key, (title, anchor) in _UNIONS.items():
        members = _union_members(top["properties"][key])
        lines += [f"## {title} {{#{anchor}}}", ""]
        holder = f"Each item of `{key}`" if "items" in top["properties"][key] else f"`{key}`"
        lines += [
            f"{holder} names its kind with `type:`: "
            + ", ".join(f"[`{kind}`](#{_anchor(name)})" for kind, name in members)
            + ". A package can add kinds through its entry points"
            " ([a tool type from a package](../how-to/tools.md#a-tool-type-from-a-package)).",
            "",
        ]
        for kind, name in members:
            lines += _block(f"`{kind}`", name, defs)
            listed.add(name)
    rest = [name for name in _reachable("Spec", defs) if name not in listed]
    if rest:
        lines += ["## Other blocks {#blocks}", "", "The blocks the keys above hold.", ""]
        for name in rest:
            lines += _block(_block_title(name, defs), name, defs)
    return "\n".join(lines) + "\n"


def _block(title: str, name: str, defs: dict[str, Any]) -> list[str]:
    return [f"### {title} {{#{_anchor(name)}}}", "", *_description(defs[name]), *_table(defs[name], defs)]


def _block_title(name: str, defs: dict[str, Any]) -> str:
    """``PromptSpec`` → ``prompt``: the key that holds the block, where one Spec key does."""
    for key, prop in defs["Spec"]["properties"].items():
        if _refs(prop) == [name]:
            return f"`{key}` ({name})"
    return name


def _anchor(name: str) -> str:
    return name.lower()


def _description(schema: dict[str, Any]) -> list[str]:
    text = schema.get("description")
    return [_paragraph(text), ""] if text else []


def _table(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    props: dict[str, Any] = schema.get("properties", {})
    if not props:
        return []
    required = set(schema.get("required", ()))
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, prop in props.items():
        if "default" in prop:
            default = _code(json.dumps(prop["default"], ensure_ascii=False))
        else:
            default = "required" if key in required else ""
        rows.append(f"| `{key}` | {_type(prop, defs)} | {default} | {_cell(prop.get('description', ''))} |")
    return [*rows, ""]


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """A property's type in words, each block a link to its section."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{_anchor(name)})"
    if "discriminator" in prop:
        key = next((k for k, v in _UNIONS.items() if _union_members(prop) == _top_members(k, defs)), None)
        if key is not None:
            title, anchor = _UNIONS[key]
            return f"one of the [{title.lower()}](#{anchor})"
    if "const" in prop:
        return _code(json.dumps(prop["const"]))
    if "enum" in prop:
        return " \\| ".join(_code(json.dumps(v)) for v in prop["enum"])
    for combiner in ("anyOf", "oneOf", "allOf"):
        if combiner in prop:
            parts = [_type(p, defs) for p in prop[combiner]]
            return " \\| ".join(dict.fromkeys(parts))
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        return f"list of {_type(items, defs)}" if items else "list"
    if kind == "object":
        values = prop.get("additionalProperties")
        if isinstance(values, dict) and values:
            return f"map of string → {_type(values, defs)}"
        return "mapping"
    if isinstance(kind, list):
        return " \\| ".join(kind)
    return kind or "any"


def _union_members(prop: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, def name) of a discriminated union (or of the union its items are)."""
    union = prop.get("items", prop)
    mapping = union.get("discriminator", {}).get("mapping", {})
    return [(kind, ref.rsplit("/", 1)[1]) for kind, ref in sorted(mapping.items())]


def _top_members(key: str, defs: dict[str, Any]) -> list[tuple[str, str]]:
    return _union_members(defs["Spec"]["properties"][key])


def _refs(schema: Any) -> list[str]:
    """The definitions a schema names, in order of appearance."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.append(value.rsplit("/", 1)[1])
            elif key != "discriminator":
                found += _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _refs(value)
    return found


def _reachable(start: str, defs: dict[str, Any]) -> list[str]:
    """Every definition reachable from ``start``, breadth first (the order a reader meets them)."""
    seen = [start]
    for name in seen:
        for ref in _refs(defs[name]):
            if ref not in seen:
                seen.append(ref)
    return seen[1:]


# ---------------------------------------------------------------------------------------------
# The CLI reference, from the typer app


def cli_reference(app: Any) -> str:
    """The Markdown of the command-line reference: every command, argument and option, with its help."""
    import typer.main

    root = typer.main.get_command(app)
    lines = [
        "# Command-line reference",
        "",
        "Every `envbuilder` command with its arguments and options, generated from the command line",
        "itself when this site is built (the same text as `envbuilder COMMAND --help`).",
        "",
    ]
    for path, command in _commands(root, ["envbuilder"]):
        lines += _command(path, command)
    return "\n".join(lines) + "\n"


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, [*path, name])


def _command(path: list[str], command: Any) -> list[str]:
    name = " ".join(path)
    level = "#" * (2 if len(path) <= 2 else 3)
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    usage = [name]
    if options:
        usage.append("[OPTIONS]")
    if getattr(command, "commands", None):
        usage.append("COMMAND")
    for arg in arguments:
        word = arg.name.upper() + ("..." if arg.nargs == -1 else "")
        usage.append(word if arg.required else f"[{word}]")
    lines = [f"{level} `{name}` {{#{'-'.join(path)}}}", "", "```", " ".join(usage), "```", ""]
    if command.help:
        lines += [_help(command.help), ""]
    subcommands = [(n, c) for n, c in getattr(command, "commands", {}).items() if not c.hidden]
    if subcommands:
        lines += ["| Command | What it does |", "|---|---|"]
        for sub_name, sub in subcommands:
            summary = (sub.help or "").strip().split("\n\n", 1)[0]
            lines.append(f"| [`{sub_name}`](#{'-'.join([*path, sub_name])}) | {_cell(summary)} |")
        lines.append("")
    if arguments:
        lines += ["| Argument | Type | Description |", "|---|---|---|"]
        for arg in arguments:
            help_text = (arg.help or "") + (" Required." if arg.required else "")
            lines.append(f"| `{arg.name.upper()}` | {_param_type(arg)} | {_cell(help_text)} |")
        lines.append("")
    if options:
        lines += ["| Option | Type | Default | Description |", "|---|---|---|---|"]
        for opt in options:
            names = ", ".join(f"`{o}`" for o in [*opt.opts, *opt.secondary_opts])
            help_text = opt.help or ""
            if opt.multiple and "repeatable" not in help_text.lower():
                help_text += " Repeatable."
            if opt.envvar:
                envvars = [opt.envvar] if isinstance(opt.envvar, str) else list(opt.envvar)
                help_text += " Environment: " + ", ".join(f"`{e}`" for e in envvars) + "."
            lines.append(f"| {names} | {_param_type(opt)} | {_default(opt)} | {_cell(help_text)} |")
        lines.append("")
    return lines


def _param_type(param: Any) -> str:
    """The value a parameter takes, as `--help` labels it (typer's label; flags take none)."""
    if getattr(param, "is_flag", False):
        return "flag"
    label = None
    display = getattr(param, "display_type_rich", None)
    if callable(display):
        try:
            label = display(None)
        except Exception:  # a typer without this method's contract: no label, as --help would show
            label = None
    text = _code(label.strip("<>")) if label else ""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None or high is not None:
        bounds = " ≤ ".join(str(b) for b in (low, "x", high) if b is not None)
        text += f" ({bounds})"
    return text


def _default(param: Any) -> str:
    default = param.default
    if getattr(param, "is_flag", False):
        return "on" if default else "off"
    if default is None or default == () or default == [] or not getattr(param, "show_default", True):
        return ""
    if isinstance(default, list | tuple):
        return ", ".join(_code(str(d)) for d in default)
    return _code(str(default))


# ---------------------------------------------------------------------------------------------
# Markdown helpers

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def _code(text: str) -> str:
    """A code span (the table parser leaves pipes inside code spans alone)."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _paragraph(text: str) -> str:
    """Help text as one paragraph per blank-line-separated block, lines joined."""
    return "\n\n".join(" ".join(block.split()) for block in text.strip().split("\n\n"))


def _help(text: str) -> str:
    return _paragraph(text)


def _cell(text: str) -> str:
    """Help text in a table cell: one line, paragraphs kept apart with <br>, and pipes outside
    code spans escaped (inside one the table parser leaves them alone, and keeps a backslash)."""
    paragraphs = [" ".join(block.split()) for block in text.strip().split("\n\n")]
    return "<br><br>".join(_escape_pipes(p) for p in paragraphs if p)


def _escape_pipes(text: str) -> str:
    pieces = _CODE_SPAN.split(text)
    # split() with two groups yields: text, fence, code, text, fence, code, ..., text
    out = []
    for i in range(0, len(pieces), 3):
        out.append(pieces[i].replace("|", "\\|"))
        if i + 2 < len(pieces):
            out.append(pieces[i + 1] + pieces[i + 2] + pieces[i + 1])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# MkDocs hooks


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the build."""
    from mkdocs.structure.files import File

    from envbuilder.cli import app

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    files.append(File.generated(config, SPEC_PAGE, content=spec_reference(schema)))
    files.append(File.generated(config, CLI_PAGE, content=cli_reference(app)))
    return files
