"""How commands report errors: the message, no traceback, exit code 1."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from envbuilder.errors import EnvbuilderError, file_error


@contextlib.contextmanager
def fail_on_errors() -> Iterator[None]:
    """Print an :class:`EnvbuilderError` to stderr and exit 1; an ``OSError`` on a named file (an
    ``--out`` in a folder that is a file, a read-only disk) likewise, naming the file and the
    reason. Any other ``OSError`` (a socket's, one without a file) is not a user's mistake with a
    path and goes on as it is."""
    try:
        yield
    except EnvbuilderError as exc:
        _fail(exc)
    except OSError as exc:
        if exc.filename is None:
            raise
        _fail(file_error(exc))


def _fail(exc: EnvbuilderError) -> None:
    typer.echo(f"error: {exc}" if "\n" not in str(exc) else f"error:\n{exc}", err=True)
    raise typer.Exit(1) from None
