"""Terminal output for the authoring commands: rich styling on a TTY, plain text otherwise.

Plain text keeps output exact for tests, pipes and CI logs; on a terminal the same lines get
colour, and long runs a progress bar.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import typer

from envbuilder.errors import Problem


def is_tty() -> bool:
    return sys.stdout.isatty()


@cache
def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def line(text: str = "", style: str | None = None) -> None:
    """Print one line (styled on a terminal)."""
    if is_tty():
        from rich.text import Text

        _console().print(Text(text, style=style or ""))
    else:
        typer.echo(text)


def problems(items: Sequence[Problem]) -> None:
    """Each problem on one line, then the line of the file it points at, with a caret."""
    sources: dict[str, list[str] | None] = {}
    for problem in items:
        if is_tty():
            from rich.text import Text

            where = problem.where()
            text = Text(where, style="bold")
            text.append(str(problem)[len(where) :], style="red")
            _console().print(text)
        else:
            typer.echo(str(problem))
        excerpt = _excerpt(problem, sources)
        if excerpt:
            source_line, caret = excerpt
            line(source_line, "dim")
            line(caret, "red")


def _excerpt(problem: Problem, cache: dict[str, list[str] | None]) -> tuple[str, str] | None:
    if problem.file is None or problem.line is None:
        return None
    if problem.file not in cache:
        try:
            cache[problem.file] = Path(problem.file).read_text(encoding="utf-8").splitlines()
        except OSError:
            cache[problem.file] = None
    lines = cache[problem.file]
    if not lines or not 0 < problem.line <= len(lines):
        return None
    gutter = f"{problem.line:>5} | "
    caret = " " * (len(gutter) - 2) + "| " + " " * ((problem.col or 1) - 1) + "^"
    return gutter + lines[problem.line - 1], caret


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> None:
    """A table: rich's on a terminal, aligned plain columns otherwise."""
    if is_tty():
        from rich.table import Table

        t = Table(title=title, title_justify="left")
        for header in headers:
            t.add_column(header, overflow="fold")
        for row in rows:
            t.add_row(*row)
        _console().print(t)
        return
    if title:
        typer.echo(title)
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    for row in (headers, *rows):
        typer.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())


@contextlib.contextmanager
def progress(total: int, description: str, *, min_total: int = 20) -> Iterator[Callable[[], None]]:
    """Yields a function to call after each step; shows a bar only on a terminal for long runs."""
    if not is_tty() or total < min_total:
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)


def shorten(text: str, limit: int = 60) -> str:
    """One line of at most ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
