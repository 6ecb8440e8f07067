"""Help pages written by click's plain formatter, so that `--help` never imports rich.

typer formats help with rich whenever rich is installed, and its rich help imports rich's
Markdown (and markdown-it) whatever the markup mode: about half of what `envbuilder --help` cost.
The command classes here keep typer's commands (their parameters, help texts and rich error
messages are untouched) and write their help with click's formatter instead: the same sections
typer's own non-rich path writes (usage, text, arguments, options, commands), with two changes
so that nothing the rich help showed is lost:

- a page is as wide as the terminal, and a group lists each command's whole first paragraph,
  wrapped, where click would stop at 80 columns and cut a summary at 45;
- Markdown code spans (the only Markdown the help texts use, as the app's markup mode is
  ``markdown``) are shown without their backticks, as rich rendered them.

Every command of the app is built from these classes (``tests/cli/test_help_imports.py`` walks
the tree and checks).
"""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Sequence
from typing import Any

import typer
import typer.core

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def plain(text: str) -> str:
    """Help text as the terminal shows it: Markdown code spans without their backticks."""
    return _CODE_SPAN.sub(r"\2", text)


# The formatter click's Context makes (typer's vendored click or click itself, whichever typer uses).
_Formatter: Any = typer.Context.formatter_class


class HelpFormatter(_Formatter):
    """click's help formatter, as wide as the terminal (as rich was; click stops at 80 columns),
    with Markdown code spans shown as their text."""

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None):
        if width is None:  # the terminal's (or $COLUMNS), under click's test runner too, as rich did
            columns = shutil.get_terminal_size().columns
            width = max((columns if max_width is None else min(columns, max_width)) - 2, 50)
        super().__init__(indent_increment, width, max_width)

    def write_text(self, text: str) -> None:
        super().write_text(plain(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(first, plain(second)) for first, second in rows], col_max, col_spacing)


class HelpContext(typer.Context):
    """A context whose help pages are written by `HelpFormatter`."""

    formatter_class = HelpFormatter


def summary(help_text: str | None, short_help: str | None = None) -> str:
    """The line a group lists for a command: its `short_help`, else its help's first paragraph."""
    text = short_help or help_text or ""
    return " ".join(inspect.cleandoc(text).partition("\f")[0].split("\n\n", 1)[0].split())


def _unset_help_is_false(option: Any) -> Any:
    """The `--help` flag's value when absent is False, not None.

    typer converts each parameter's value with pydantic unless it is already a bool; the help
    flag's default is None, so a group's absent `--help` (`envbuilder serve --help` parses the
    root group's) imported pydantic just to convert None to None.
    """
    if option is not None and option.default is None:
        option.default = False
    return option


class Command(typer.core.TyperCommand):
    """A typer command whose help is plain text."""

    context_class = HelpContext

    def get_help_option(self, ctx: Any) -> Any:
        return _unset_help_is_false(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # click's own format_help (usage, text, options, epilog), not typer's switch to rich
        super(typer.core.TyperCommand, self).format_help(ctx, formatter)


class Group(typer.core.TyperGroup):
    """A typer group whose help is plain text and lists each command's whole summary."""

    context_class = HelpContext

    def get_help_option(self, ctx: Any) -> Any:
        return _unset_help_is_false(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super(typer.core.TyperGroup, self).format_help(ctx, formatter)

    def summaries(self, ctx: Any) -> list[tuple[str, str]]:
        """(name, summary) of each command the help lists, in order."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command.help, command.short_help)))
        return rows

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = self.summaries(ctx)
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # typer's rich error handler prints nothing for "no arguments, so help": the rich help
        # used to print itself while being rendered. Print it here, to stdout, and exit 2 as before.
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            typer.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(2)
        return super().parse_args(ctx, args)


__all__ = ["Command", "Group", "HelpContext", "HelpFormatter", "plain", "summary"]
