"""Scaffold a commented spec from a dataset: guess its splits, prompt and answer columns, grader."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.authoring._guess import ANSWER_COLUMNS, Guess, guess
from envbuilder.data import Row, detect_encoding, hub_unreachable, sources
from envbuilder.errors import DataError
from envbuilder.prompting import SAMPLE_ROWS

__all__ = ["Scaffold", "scaffold_spec"]

#: The file kinds `init` reads, by suffix: each is a `dataset.type` (a source of the spec).
FILE_KINDS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "json", ".csv": "csv"}
_SPLIT_WORDS = {
    "train": "train", "training": "train",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
    "test": "test", "testing": "test", "eval": "test",
}  # fmt: skip
_SPLIT_RE = re.compile(r"(?<![a-z])(" + "|".join(sorted(_SPLIT_WORDS, key=len, reverse=True)) + r")(?![a-z])")


@dataclass
class Scaffold:
    """A scaffolded spec and the guesses behind it."""

    text: str
    name: str
    splits: list[str]
    guess: Guess
    kind: str
    """The spec's `dataset.type`."""

    @property
    def prompt_column(self) -> str:
        return self.guess.prompt

    @property
    def answer_column(self) -> str:
        return self.guess.answer

    @property
    def numeric(self) -> bool:
        return self.guess.numeric


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def scaffold_spec(
    dataset: str,
    *,
    out: Path | None = None,
    prompt_column: str | None = None,
    answer_column: str | None = None,
    huggingface: bool = False,
    config: str | None = None,
) -> Scaffold:
    """A commented spec for ``dataset``: a Parquet, JSON Lines, JSON or CSV file or a folder of
    them, or (``huggingface=True``, or an ``owner/name`` that is no local path) a HuggingFace
    hub id or hub-shaped local folder.

    Paths in the spec are relative to ``out`` (the file the spec will be written to; the
    current directory when None). Raises DataError when the data cannot be read or a column
    cannot be guessed.
    """
    root = Path(dataset).expanduser()
    spec_dir = (out.parent if out is not None else Path.cwd()).resolve()
    if huggingface or config is not None or (not root.exists() and _HUB_ID.match(dataset)):
        hub_path = _relpath(root, spec_dir) if root.exists() else dataset
        rows, columns, splits = _sample_hub(dataset if not root.exists() else str(root.resolve()), config)
        block = [
            "  type: huggingface",
            "  # A hub repo id, or a local folder laid out like one.",
            f"  path: {_q(hub_path)}",
        ]
        if config is not None:
            block.append(f"  config: {_q(config)}")
        name = _name(Path(dataset.rsplit("/", 1)[-1]) if not root.exists() else root)
        return _finish(name, "huggingface", block, splits, rows, columns, prompt_column, answer_column)
    if not root.exists():
        raise DataError(
            f"no file or folder at {dataset!r}",
            hint="Give a Parquet, JSON Lines, JSON or CSV file or a folder of them, or a HuggingFace id"
            " (owner/name)",
            code="data_not_found",
        )
    kind, paths = _data_files(root, dataset)
    files = _group_splits(paths, root)
    first = next(iter(files))
    encoding = detect_encoding(paths) if kind != "parquet" else None
    rows, columns = _sample(kind, files[first], encoding)
    if not rows:
        shown = ", ".join(str(p) for p in files[first])
        raise DataError(
            f"the data has no rows: {kind} {'file' if len(files[first]) == 1 else 'files'} {shown}"
            f" (split {first!r}) {'is' if len(files[first]) == 1 else 'are'} empty",
            hint="Give data with at least one row (a header alone is no row)",
            code="data_empty",
        )
    rel = {split: [_relpath(p, spec_dir) for p in split_paths] for split, split_paths in files.items()}
    block = [
        f"  type: {kind}",
        f"  # Source split name -> {kind} file(s), relative to this spec.",
        "  files:",
    ]
    for split, split_paths in rel.items():
        if len(split_paths) == 1:
            block.append(f"    {split}: {_q(split_paths[0])}")
        else:
            block.append(f"    {split}:")
            block += [f"      - {_q(path)}" for path in split_paths]
    if encoding is not None:
        block.append(f"  encoding: {encoding}   # detected: the files are not UTF-8 text")
    splits = {split: split for split in rel}
    return _finish(_name(root), kind, block, splits, rows, columns, prompt_column, answer_column)


def _finish(
    name: str,
    kind: str,
    dataset_block: list[str],
    splits: dict[str, str],
    rows: list[Row],
    columns: list[str],
    prompt_column: str | None,
    answer_column: str | None,
) -> Scaffold:
    guessed = guess(rows, columns, prompt_column, answer_column)
    text = render_spec(name, dataset_block, splits, columns, guessed)
    text += "".join(f"{line}\n" for line in conversation_hints(rows, columns))
    return Scaffold(text, name, list(splits), guessed, kind)


def _data_files(root: Path, dataset: str) -> tuple[str, list[Path]]:
    """The kind of data at ``root`` and its files (of a folder: those of its most common kind)."""
    if root.is_file():
        kind = FILE_KINDS.get(root.suffix.lower())
        if kind is None:
            raise DataError(
                f"cannot read {dataset!r}: expected a {', '.join(FILE_KINDS)} file",
                hint="Convert it to one of these, or give a HuggingFace dataset folder with --hf",
                code="data_unreadable",
            )
        return kind, [root]
    found: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        kind = FILE_KINDS.get(path.suffix.lower())
        if kind is not None and path.is_file() and not path.name.startswith("."):
            found.setdefault(kind, []).append(path)
    if not found:
        raise DataError(
            f"no data files in {dataset!r}",
            hint=f"Give a folder of {', '.join(FILE_KINDS)} files, or a HuggingFace dataset folder with --hf",
            code="data_not_found",
        )
    kind = max(found, key=lambda k: (len(found[k]), -list(FILE_KINDS.values()).index(k)))
    return kind, found[kind]


def conversation_hints(rows: list[Row], columns: list[str]) -> list[str]:
    """Commented suggestions for columns that hold conversations: a list of role/content turns
    (a `prompt.conversation`) or a list of several user turns (a `dialogue` that unfolds)."""
    lines: list[str] = []
    for column in columns:
        values: list[list[Any]] = [v for row in rows if isinstance(v := row.get(column), list)]
        if not values or len(values) < sum(row.get(column) is not None for row in rows) or not all(values):
            continue
        var = _var(column)
        if all(isinstance(t, dict) and "role" in t and "content" in t for v in values for t in v):
            lines += [
                "",
                f"# `{column}` holds role/content turns: to serve them as the conversation, replace",
                "# `prompt.template` with:",
                "#   conversation: {column: " + var + "}",
            ]
        elif (
            column not in ANSWER_COLUMNS  # reference answers per turn are not user turns
            and all(isinstance(t, str) for v in values for t in v)
            and any(len(v) > 1 for v in values)
        ):
            lines += [
                "",
                f"# `{column}` holds several user turns: to reveal them one at a time (the submit tool's",
                "# output is the next turn; the grader sees `turn`, `user_turns` and `replies`), use",
                f'#   prompt: {{template: "{{{{ {var}[0] }}}}"}}',
                f"#   dialogue: {{column: {var}, grade: each, reward: mean}}",
            ]
    return lines


def _sample_hub(path: str, config: str | None) -> tuple[list[Row], list[str], dict[str, str]]:
    """Rows and columns of the first split of a hub dataset, and ``{split: its type}``."""
    if not Path(path).is_dir():
        reason = hub_unreachable()
        if reason is not None and reason != "HF_HUB_OFFLINE is set":  # offline: read the cache
            raise DataError(
                f"cannot read the hub dataset {path!r}: the hub cannot be reached ({reason})",
                hint="With network access run it again (the dataset is then cached); to use a copy"
                " already in the HuggingFace cache, set HF_HUB_OFFLINE=1; or give a local folder",
                code="data_unavailable",
            )
    source_cls = sources.get("huggingface")
    cfg = source_cls.Config.model_validate({"type": "huggingface", "path": path, "config": config})
    source = source_cls(cfg, Path.cwd())
    names = source.split_names()
    if not names:
        raise DataError(f"the dataset {path!r} has no splits", code="data_empty")
    table = source.open(names[0])
    if len(table) == 0:
        raise DataError(
            f"the data has no rows: split {names[0]!r} of the dataset {path!r} is empty",
            hint="Give a dataset whose first split has rows",
            code="data_empty",
        )
    splits = {n: _SPLIT_WORDS.get(n.lower(), "test") for n in names}
    return table.rows(0, min(SAMPLE_ROWS, len(table))), list(table.columns), splits


def _group_splits(paths: list[Path], root: Path) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for path in paths:
        rel = str(path.relative_to(root)) if path != root else path.name
        found = _SPLIT_RE.findall(rel.lower())
        split = _SPLIT_WORDS[found[-1]] if found else "test"
        groups.setdefault(split, []).append(path)
    order = ["train", "validation", "test"]
    return {k: groups[k] for k in sorted(groups, key=order.index)}


def _sample(kind: str, paths: list[Path], encoding: str | None = None) -> tuple[list[Row], list[str]]:
    source_cls = sources.get(kind)
    files = {"s": [str(p.resolve()) for p in paths]}
    extra = {"encoding": encoding} if encoding is not None else {}
    config = source_cls.Config.model_validate({"type": kind, "files": files, **extra})
    table = source_cls(config, Path("/")).open("s")
    return table.rows(0, min(SAMPLE_ROWS, len(table))), list(table.columns)


def _name(root: Path) -> str:
    stem = root.stem if root.is_file() else root.name
    if root.is_file() and _SPLIT_RE.search(stem.lower()):
        stem = root.parent.name
    name = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")
    return name or "my-env"


def _relpath(path: Path, start: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), start)).as_posix()
    except ValueError:  # another drive on Windows
        return path.resolve().as_posix()


def _q(value: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (JSON strings are valid YAML)."""
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)


def _var(column: str) -> str:
    return re.sub(r"\W+", "_", column).strip("_").lower() or "field"


def render_spec(
    name: str, dataset_block: list[str], splits: dict[str, str], columns: list[str], g: Guess
) -> str:
    """The commented spec text of the guess ``g``."""
    used = [c for c in (g.prompt, g.prompt_more, g.answer, g.choices) if c is not None]
    rename = {c: _var(c) for c in dict.fromkeys(used) if not c.isidentifier()}

    def var(expr: str) -> str:  # a column expression with the column renamed
        column, _, rest = expr.partition("[")
        return rename.get(column, column) + (f"[{rest}" if rest else "")

    # Rows without a target or a prompt are left out (by the source's column names).
    missing = [(f"# {n} of the first {g.sampled} rows have no `{c}` {what}", c) for c, n, what in g.missing()]
    needed = list(dict.fromkeys(c for _, c in missing if c.isidentifier()))
    keep = " and ".join(f"{c} is not none and {c} != ''" for c in needed) or None
    lines = [
        f"# {name}: scaffolded by `envbuilder init`. Check it with:",
        "#   envbuilder validate SPEC && envbuilder preview SPEC && envbuilder check SPEC",
        "# Editor completion: `envbuilder schema > envbuilder.schema.json`, then start this file with",
        "#   # yaml-language-server: $schema=envbuilder.schema.json",
        "",
        "# The environment's name in URLs: lowercase letters, digits, `-`, `_`.",
        f"name: {name}",
        f"title: {_q(name)}",
        "# What the environment tests (shown in catalogs).",
        f"description: {_q(f'Answer the `{g.prompt}` column; graded by {g.grader} against `{g.answer}`.')}",
        "",
        f"# Where the rows come from. Columns: {', '.join(columns)}.",
        "dataset:",
        *dataset_block,
        "",
        "# The splits served, and what each is for (train, validation or test).",
    ]
    for reason, c in missing:
        if not c.isidentifier():
            lines += [
                f"{reason}: a `filter:` cannot name this column,",
                "# rename it in the data to drop them.",
            ]
    reasons = [reason for reason, c in missing if c.isidentifier()]
    if reasons:
        lines += [*reasons[:-1], reasons[-1] + ":"]
        lines.append(
            "# each split keeps only the rows that have " + ("both." if len(reasons) > 1 else "one.")
        )
    lines.append("splits:")
    extra = f", filter: {_q(keep)}" if keep is not None else ""
    lines += [f"  {_q(split)}: {{type: {kind}{extra}}}" for split, kind in splits.items()]
    if rename or g.id_column or g.private or g.exclude:
        lines += ["", "# How a row becomes a task.", "task:"]
        if g.id_column:
            lines.append(f"  id: {_q(g.id_column)}   # unique per row: the task id")
        if g.exclude:
            lines.append("  # `id` repeats, is empty or gives the answer away: task ids are `<split>-<row>`.")
            lines.append(f"  exclude: [{', '.join(_q(c) for c in g.exclude)}]")
        if g.private:
            shown = ", ".join(_q(c) for c in [g.answer, *g.private])
            lines.append(f"  # Clients never see these: {', '.join(g.private)} hold(s) the answer too.")
            lines.append(f"  private: [{shown}]")
        if rename:
            lines += ["  # Column names that are not valid template variables, renamed.", "  rename:"]
            lines += [f"    {_q(old)}: {new}" for old, new in rename.items()]
    lines += _prompt_lines(g, var)
    lines += _grader_lines(g, var)
    lines += [
        "",
        "# Responses with the reward each must get (`envbuilder check` runs them).",
        "# tests:",
        '#   - {response: "The answer is 42.", reward: 1, split: test, index: 0}',
    ]
    return "\n".join(lines) + "\n"


def _ask(g: Guess) -> str:
    if g.grader == "choice":
        return "the letter of the correct answer"
    return "your final answer as a number" if g.numeric else "your final answer"


def _prompt_lines(g: Guess, var: Any) -> list[str]:
    if g.conversation:
        return [
            "",
            f"# The prompt: the conversation held in the `{g.prompt}` column (a list of role/content turns).",
            "prompt:",
            "  conversation:",
            f"    column: {var(g.prompt)}",
            "",
            "# The tool the agent answers with.",
            "submit:",
            f"  description: Submit {_ask(g)}.",
        ]
    body = [f"    {{{{ {var(g.prompt_expr)} }}}}", ""]
    if g.prompt_more is not None:  # `instruction`, then `input` when there is one
        more = var(g.prompt_more)
        # (a block tag's own line break is dropped: `trim_blocks`)
        body = [body[0], f"    {{% if {more} %}}", "", f"    {{{{ {more} }}}}", "    {% endif %}", ""]
    if g.grader == "choice":
        body += [f"    {{{{ {var(g.choices or '')} | lettered }}}}", ""]
    about = [f"# The prompt: a Jinja template over the task's fields (the prompt column is `{g.prompt}`)."]
    if g.prompt_more is not None:
        about = [about[0][:-2] + ",", f"# followed by `{g.prompt_more}` when it is not empty)."]
    return [
        "",
        *about,
        "prompt:",
        "  template: |-",
        *body,
        f"    When you are done, call the `submit` tool with {_ask(g)}.",
        "",
        "# The tool the agent answers with.",
        "submit:",
        f"  description: Submit {_ask(g)}.",
    ]


def _grader_lines(g: Guess, var: Any) -> list[str]:
    target = var(g.target)
    lines = ["", f"# How an answer is graded against the answer column `{g.answer}`.", "grader:"]
    if g.grader == "choice":
        return [
            *lines,
            "  type: choice",
            "  # The correct option, as a letter or an index into the options.",
            f'  target: "{{{{ {target} }}}}"',
            f"  choices_field: {var(g.choices or '')}",
        ]
    if g.grader == "math":
        return [
            *lines,
            "  # The answers are LaTeX: compared for mathematical equivalence",
            "  # (the `math` grader); `$...$` marks the target as LaTeX.",
            "  type: math",
            f'  target: "${{{{ {target} }}}}$"',
        ]
    lines.append("  type: exact_match")
    if g.gsm8k_style:
        return [
            *lines,
            '  # The reference ends with "#### <number>"; the number after it is the target.',
            f"  target: \"{{{{ {target}.split('####')[-1] }}}}\"",
            '  # Compare the final number of the response ("The answer is $1,000" -> 1000).',
            "  extract: number",
            "",
            "# What `envbuilder check` submits as each task's gold answer: the whole reference.",
            f'gold: "{{{{ {target} }}}}"',
        ]
    if g.numeric:
        return [
            *lines,
            "  # The answers are numbers: the target is the answer column.",
            f'  target: "{{{{ {target} }}}}"',
            '  # Compare the final number of the response ("The answer is $1,000" -> 1000).',
            "  extract: number",
        ]
    if g.free_text:
        lines[2:2] = [  # before `grader:`
            "# The answers are long free text, which an exact match will rarely meet: consider grading",
            "# with a judge model instead (`type: llm_judge`, see the README).",
        ]
    return [
        *lines,
        "  # The whole response must equal the answer (after trimming whitespace).",
        f'  target: "{{{{ {target} }}}}"',
    ]
