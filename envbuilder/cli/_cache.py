"""``envbuilder cache show|clear``: the reply cache of the simulated user and the judge."""

from __future__ import annotations

import typer

from envbuilder.cli._help import Command, Group

cache_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="The reply cache of the simulated user and the judge: where it is, how big, clear it.",
)


@cache_app.command("show", cls=Command)
def show() -> None:
    """Where the reply cache lives, what it keys on, and how many replies it holds.

    The folder is $ENVBUILDER_CACHE_DIR (default ~/.cache/envbuilder). A reply is kept by a hash
    of its whole request: endpoint, model, sampling, the rendered messages and the tools
    offered. `--no-cache` on serve, eval and check (or ENVBUILDER_REPLY_CACHE=off) bypasses it.
    """
    from envbuilder.llm import open_cache

    cache = open_cache()
    if not cache.path.exists():
        typer.echo(f"{cache.path}: no cache yet")
        return
    size = cache.path.stat().st_size
    typer.echo(f"{cache.path}: {cache.count():,} replies, {size / 1e6:.1f} MB")


@cache_app.command("clear", cls=Command)
def clear() -> None:
    """Delete every cached reply (the judge's verdicts and the simulated user's turns)."""
    from envbuilder.llm import open_cache

    cache = open_cache()
    if not cache.path.exists():
        typer.echo(f"{cache.path}: no cache yet, nothing to clear")
        return
    removed = cache.clear()
    typer.echo(f"{cache.path}: {removed:,} replies deleted")
