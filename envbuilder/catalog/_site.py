"""The catalog as files: ``catalog.json``, a self-contained ``index.html``, one page per environment,
and the Markdown table of ``envs/README.md``."""

from __future__ import annotations

import collections
import functools
import json
import re
from pathlib import Path
from typing import Any

import jinja2

from envbuilder.errors import DataError
from envbuilder.paths import relative_url, write_file
from envbuilder.spec import ENV_NAME_PATTERN
from envbuilder.templating import templates_dir

__all__ = ["render_readme", "write_site"]

_NAME = re.compile(ENV_NAME_PATTERN)  # it names a page file and a link


@functools.cache
def _html() -> jinja2.Environment:
    # Not the sandboxed prompt factory: these templates are ours. Everything from a spec is data
    # and autoescaped; the CSS and JS are inlined so the site needs no network.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "catalog"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    env.filters["count"] = lambda n: f"{n:,}"
    env.filters["short_hash"] = lambda h: h.split(":", 1)[-1][:12]
    env.filters["url"] = relative_url  # a link made from data stays a relative path
    return env


def _tags(entries: list[dict[str, Any]]) -> list[tuple[str, int]]:
    counts = collections.Counter(tag for e in entries for tag in e["tags"])
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def write_site(catalog: dict[str, Any], out: Path) -> list[Path]:
    """Write ``catalog.json``, ``index.html`` and ``env/<name>.html`` under ``out``; returns the files.

    Pages of environments no longer in the catalog are removed from ``out/env``. Every file is
    made here and renamed into place, never written through a link in ``out``
    (:func:`envbuilder.paths.write_file`).

    Raises:
        EnvbuilderError: an entry's name is not an environment name (``catalog_invalid``: a
            catalog read back from a store is data), or a target is a link (``unsafe_output``).
    """
    entries = catalog["environments"]
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise DataError(
                f"the catalog lists an environment named {name!r}, which is not an environment name",
                hint="Names are lowercase letters, digits, `-` and `_`; publish to a clean destination",
                code="catalog_invalid",
            )
    pages = out / "env"
    index = _html().get_template("index.html.jinja")
    page = _html().get_template("environment.html.jinja")
    written = [
        write_file(
            out / "catalog.json", json.dumps(catalog, indent=2, ensure_ascii=False) + "\n", inside=out
        ),
        write_file(
            out / "index.html",
            index.render(catalog=catalog, entries=entries, tags=_tags(entries)),
            inside=out,
        ),
    ]
    for entry in entries:
        written.append(
            write_file(pages / f"{entry['name']}.html", page.render(catalog=catalog, e=entry), inside=out)
        )
    for stale in set(pages.glob("*.html")) - set(written):
        stale.unlink()  # `env` was entered without following a link just above
    return written


#: What could make spec text a link, an image, a tag, an entity, a code span or a table cell
#: boundary in Markdown (emphasis is left alone: it cannot run or link anything).
_MARKDOWN = re.compile(r"([\\`\[\]|])")
#: A code span as authors write one (`name`): kept a code span, whose content Markdown shows as is.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _cell(text: str | None) -> str:
    """Spec text (a title, a licence, a description) as one Markdown table cell that shows it
    as typed: its code spans stay code spans, and nothing else in it can become HTML, a link,
    an image or another cell."""
    plain = " ".join((text or "").split())
    out, pos = [], 0
    for span in _CODE_SPAN.finditer(plain):
        out += [_text(plain[pos : span.start()]), _code(span.group(2))]
        pos = span.end()
    out.append(_text(plain[pos:]))
    return "".join(out)


def _text(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", text)


def _comment(text: str) -> str:
    """``text`` as an HTML comment that nothing in it (a typed path) can end early."""
    return f"<!-- {text.replace('>', '&gt;')} -->"


def _code(text: str) -> str:
    """``text`` as a Markdown code span (its content shown literally, whatever it holds)."""
    text = " ".join(text.split()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_readme(catalog: dict[str, Any], links: dict[str, str], *, specs: str, readme: str) -> str:
    """The Markdown listing of a folder of specs (such as ``envs/README.md``).

    ``links`` maps a name to its spec's path relative to the README; ``specs`` and ``readme`` are
    the command's arguments as typed, to say how to serve the environments and regenerate the file.
    """
    count = len(catalog["environments"])
    lines = [
        "# Environments",
        "",
        f"{count} environment{'s' if count != 1 else ''}, with their splits, task counts and licences.",
        f"Serve {'them all' if count != 1 else 'it'} with {_code(f'envbuilder serve {specs}')}.",
        "",
        _comment(
            f"Generated by `envbuilder catalog {specs} --readme {readme}`; run it again after a change."
        ),
        "",
        "| Environment | Title | Splits (tasks) | Licence | Description |",
        "|---|---|---|---|---|",
    ]
    for e in catalog["environments"]:
        name = _code(e["name"])
        if e["name"] in links:
            name = f"[{name}]({relative_url(links[e['name']])})"
        splits = ", ".join(f"{_cell(s['name'])} {s['num_tasks']:,}" for s in e["splits"])
        lines.append(
            f"| {name} | {_cell(e['title'])} | {splits} | {_cell(e['license']) or '—'} "
            f"| {_cell(e['description'])} |"
        )
    return "\n".join(lines) + "\n"
