"""How commands report errors: the message, no traceback, exit code 1."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from envbuilder.errors import EnvbuilderError


@contextlib.contextmanager
def fail_on_errors() -> Iterator[None]:
    """Print an :class:`EnvbuilderError` to stderr and exit 1."""
    try:
        yield
    except EnvbuilderError as exc:
        typer.echo(f"error: {exc}" if "\n" not in str(exc) else f"error:\n{exc}", err=True)
        raise typer.Exit(1) from None
