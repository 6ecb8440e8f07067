"""The ``envbuilder`` command line: one module per command."""

from __future__ import annotations

from typing import Annotated

import typer

from envbuilder import __version__
from envbuilder.cli import (
    _catalog,
    _check,
    _eval_group,
    _init,
    _pack,
    _preview,
    _publish,
    _pull,
    _schema,
    _serve,
    _validate,
    _view,
)

app = typer.Typer(
    name="envbuilder",
    help="Declare LLM-agent environments in YAML and serve them over ORS.",
    no_args_is_help=True,
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
app.command("schema")(_schema.schema)
app.command("init")(_init.init)
app.add_typer(_eval_group.eval_app, name="eval")
app.command("view")(_view.view)


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
