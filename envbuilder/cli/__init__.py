"""The ``envbuilder`` command line: one module per command."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

import typer
import typer.core

from envbuilder._version import __version__
from envbuilder.cli._lazy import LazyGroup
from envbuilder.cli._output import fail_on_errors

# Each command's module is imported when the command runs or a help page lists it (cli/_lazy.py);
# the order is the order `envbuilder --help` lists them in.
COMMANDS = {
    "serve": "envbuilder.cli._serve:serve",
    "catalog": "envbuilder.cli._catalog:catalog",
    "pack": "envbuilder.cli._pack:pack",
    "publish": "envbuilder.cli._publish:publish",
    "pull": "envbuilder.cli._pull:pull",
    "validate": "envbuilder.cli._validate:validate",
    "preview": "envbuilder.cli._preview:preview",
    "check": "envbuilder.cli._check:check",
    "mcp": "envbuilder.cli._mcp:mcp",
    "schema": "envbuilder.cli._schema:schema",
    "init": "envbuilder.cli._init:init",
    "view": "envbuilder.cli._view:view",
    "profile": "envbuilder.cli._profile:profile",
    "eval": "envbuilder.cli._eval_group:eval_app",
    "sandbox": "envbuilder.cli._sandbox:sandbox_app",
    "export": "envbuilder.cli._export:export_app",
    "cache": "envbuilder.cli._cache:cache_app",
}


def _flag_type(display_type_rich: Callable[[Any, Any], str | None]) -> Callable[[Any, Any], str | None]:
    """Typer labels every option with its type; a flag takes no value, so it gets no `<bool>`."""

    @functools.wraps(display_type_rich)
    def patched(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else display_type_rich(self, ctx)

    return patched


# Typer has no setting for this; wrap its method once (tests/cli/test_help.py checks the result,
# and a Typer without the method is left alone: help then only shows the labels again).
_Option: Any = getattr(typer.core, "TyperOption", None)
if hasattr(_Option, "display_type_rich") and not hasattr(_Option.display_type_rich, "__wrapped__"):
    _Option.display_type_rich = _flag_type(_Option.display_type_rich)


class _Commands(LazyGroup):
    lazy_commands = COMMANDS

    def invoke(self, ctx: Any) -> Any:
        # The one error boundary of every command, for what a command's own does not cover
        # (a file written after it, e.g. `init --out` in a folder that is a file).
        with fail_on_errors():
            return super().invoke(ctx)


app = typer.Typer(
    name="envbuilder",
    cls=_Commands,
    help="Declare LLM-agent environments in YAML and serve them over ORS.",
    no_args_is_help=True,
    rich_markup_mode="markdown",  # paragraphs reflow: docstrings wrap at 110 columns, help at the terminal
    pretty_exceptions_show_locals=False,  # locals may hold secrets
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envbuilder {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Declare LLM-agent environments in YAML and serve them over ORS."""


def main() -> None:
    app()


__all__ = ["app", "main"]
