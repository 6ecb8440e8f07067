"""Commands registered by name and built on first use, so a command line imports only its command.

The root group is given a table of command name → ``"module:attribute"`` (a command function
or a sub-``typer.Typer``). Its ``commands`` mapping knows the names without importing anything;
looking one up imports that module and builds the click command exactly as
``app.command(name)(function)`` or ``app.add_typer(sub_app, name=name)`` on the root app would
(typer's own builder, through a throwaway app with the root's settings). So
`envbuilder serve …` imports the serve command's module only, and `envbuilder --help` imports
each command's module, whose top level is kept light, to list its summary. click allows a
group's ``commands`` to be any mutable mapping for this purpose. The root's help lists each
command's summary from its definition (its docstring, or its sub-app's help) without building it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import typer
import typer.main
import typer.models

from envbuilder.cli._help import Command, Group, summary


def build(name: str, target: Any, *, rich_markup_mode: Any) -> Any:
    """The click command ``name`` for a command function or a sub-app, as the root app builds it."""
    app = typer.Typer(rich_markup_mode=rich_markup_mode, add_completion=False)
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=name)
    else:
        app.command(name, cls=Command)(target)
    return typer.main.get_group(app).commands[name]


class LazyCommands(MutableMapping[str, Any]):
    """Command name → click command, importing and building each on first lookup."""

    def __init__(self, targets: Mapping[str, str], *, rich_markup_mode: Any) -> None:
        self._targets = dict(targets)  # name → "module:attribute", in the order help lists them
        self._built: dict[str, Any] = {}
        self._markup = rich_markup_mode

    def target(self, name: str) -> Any:
        """The command function or sub-app ``name`` names (its module imported)."""
        module, _, attribute = self._targets[name].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            self._built[name] = build(name, self.target(name), rich_markup_mode=self._markup)
        return self._built[name]

    def describe(self, name: str) -> tuple[str, bool]:
        """(summary, hidden) of command ``name``, read from its definition as typer reads it,
        without building the command (which evaluates every parameter's annotation)."""
        if name in self._built:
            command = self._built[name]
            return summary(command.help, command.short_help), bool(command.hidden)
        target = self.target(name)
        if isinstance(target, typer.Typer):  # what add_typer(target, name=name) would set
            info = typer.main.solve_typer_info_defaults(typer.models.TyperInfo(target, name=name))
            return summary(info.help, info.short_help), bool(info.hidden)
        return summary(inspect.getdoc(target)), False  # what command(name)(target) would set

    def __setitem__(self, name: str, command: Any) -> None:
        self._targets.setdefault(name, "")
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._targets[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets


class LazyGroup(Group):
    """The root group: subclasses set ``lazy_commands``, a table name → ``"module:attribute"``."""

    lazy_commands: Mapping[str, str] = {}

    def __init__(self, *, commands: Any = None, **kwargs: Any) -> None:
        super().__init__(commands=None, **kwargs)
        table = LazyCommands(self.lazy_commands, rich_markup_mode=self.rich_markup_mode)
        for name, command in dict(commands or {}).items():  # commands registered on the app itself
            table[name] = command
        self.commands = self.table = table

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names, without building the commands (typer's reads items)

    def summaries(self, ctx: Any) -> list[tuple[str, str]]:
        rows = []
        for name in self.list_commands(ctx):
            line, hidden = self.table.describe(name)
            if not hidden:
                rows.append((name, line))
        return rows


__all__ = ["LazyCommands", "LazyGroup", "build"]
