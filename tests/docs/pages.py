"""Reading the manual's pages in tests: a page, one of its sections, its code blocks, the
commands of a console block with their output. The pages are docs/ (and README.md, the front
page); what they show is run by the tests beside this module and by the tests of the features
they document."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def page(name: str) -> str:
    """A page of the manual by its path under docs/ (``how-to/security.md``), or ``README.md``."""
    path = README if name == "README.md" else DOCS / name
    return path.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The section of ``text`` whose heading starts with ``heading`` (``## One episode``), up to
    the next heading of the same or a higher level (lines in code blocks are not headings)."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.split("\n")
    fenced = False
    start: int | None = None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and start is None and line.startswith(heading):
            start = i + 1
        elif not fenced and start is not None and re.match(rf"#{{1,{level}}} ", line):
            return "\n".join(lines[start:i])
    assert start is not None, f"no section {heading!r}"
    return "\n".join(lines[start:])


def blocks(text: str, lang: str = "") -> list[str]:
    """The fenced code blocks of ``text`` whose info string is ``lang`` (``""``: no language),
    or starts with it followed by attributes (```` ```yaml title="x.yaml" ```` is a ``yaml``
    block and a ``yaml title="x.yaml"`` block)."""
    found: list[str] = []
    info: str | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if info is None and line.startswith("```"):
            info, body = line[3:].strip(), []
        elif info is not None and line.strip() == "```":
            if info == lang or (lang and info.startswith(lang + " ")):
                found.append("\n".join(body) + "\n")
            info = None
        elif info is not None:
            body.append(line)
    return found


def steps(block: str) -> list[tuple[str, str]]:
    """(command, expected output) for each ``$ `` line of a console block; a command continued
    with a trailing backslash is joined (``shlex.split(command, comments=True)`` drops a
    trailing ``# comment``)."""
    found: list[tuple[str, str]] = []
    for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
        lines = chunk.split("\n")
        command = lines.pop(0)
        while command.endswith("\\"):
            command = command[:-1] + " " + lines.pop(0).strip()
        found.append((command, "\n".join(lines).strip("\n")))
    return found
