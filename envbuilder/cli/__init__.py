"""The ``envbuilder`` command line: one module per command."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

import typer
import typer.core

from envbuilder._version import __version__
from envbuilder.cli import (
    _cache,
    _catalog,
    _check,
    _eval_group,
    _export,
    _init,
    _mcp,
    _pack,
    _preview,
    _profile,
    _publish,
    _pull,
    _sandbox,
    _schema,
    _serve,
    _validate,
    _view,
)


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

app = typer.Typer(
    name="envbuilder",
    help="Declare LLM-agent environments in YAML and serve them over ORS.",
    no_args_is_help=True,
    rich_markup_mode="markdown",  # paragraphs reflow: docstrings wrap at 110 columns, help at the terminal
    pretty_exceptions_show_locals=False,  # locals may hold secrets
    add_completion=False,
)
app.command("serve")(_serve.serve)
app.command("catalog")(_catalog.catalog)
app.command("pack")(_pack.pack)
app.command("publish")(_publish.publish)
app.command("pull")(_pull.pull)
app.command("validate")(_validate.validate)
app.command("preview")(_preview.preview)
app.command("check")(_check.check)
app.command("mcp")(_mcp.mcp)
app.command("schema")(_schema.schema)
app.command("init")(_init.init)
app.add_typer(_eval_group.eval_app, name="eval")
app.command("view")(_view.view)
app.command("profile")(_profile.profile)
app.add_typer(_sandbox.sandbox_app, name="sandbox")
app.add_typer(_export.export_app, name="export")
app.add_typer(_cache.cache_app, name="cache")


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
