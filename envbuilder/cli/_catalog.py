"""``envbuilder catalog SPEC…``: write catalog.json and a static site (and envs/README.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envbuilder.cli._output import fail_on_errors

if TYPE_CHECKING:
    from envbuilder.environment import Environment


def load_or_exit(paths: list[Path], *, strict: bool, cache_dir: Path | None = None) -> list[Environment]:
    """Load every environment under ``paths``; report each failure on stderr and go on, unless
    ``strict``; exit 1 when a failure is fatal or nothing loaded."""
    from envbuilder.catalog import load_environments

    with fail_on_errors():
        collection = load_environments(paths, cache_dir=cache_dir)
    for failure in collection.failures:
        typer.echo(f"error: {failure}", err=True)
    if collection.failures and strict:
        typer.echo(f"error: {len(collection.failures)} failed to load (--strict)", err=True)
        raise typer.Exit(1)
    if not collection.envs:
        typer.echo("error: no environment loaded", err=True)
        raise typer.Exit(1)
    return collection.envs


def catalog(
    specs: Annotated[
        list[Path], typer.Argument(help="Spec files (YAML), folders of specs, or packs (.zip).")
    ],
    out: Annotated[
        Path | None, typer.Option(help="Folder to write catalog.json, index.html and env/*.html into.")
    ] = None,
    readme: Annotated[
        Path | None, typer.Option(help="Also write the Markdown table of environments to this file.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if any spec fails to load (default: skip it).")
    ] = False,
    results: Annotated[
        list[Path] | None,
        typer.Option(help="Run summaries of `envbuilder eval --out` (repeatable): a leaderboard per page."),
    ] = None,
) -> None:
    """Catalog the environments of SPECS; without --out or --readme, print catalog.json."""
    from envbuilder.catalog import build_catalog, render_readme, write_site

    envs = load_or_exit(specs, strict=strict)
    with fail_on_errors():
        data = build_catalog(envs)
        if results:
            from envbuilder.eval._leaderboard import attach_leaderboards

            for warning in attach_leaderboards(data, results):
                typer.echo(f"warning: {warning}", err=True)
    if out is None and readme is None:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    if out is not None:
        files = write_site(data, out)
        typer.echo(
            f"envbuilder: catalogued {len(envs)} environment(s) in {out / 'index.html'} ({len(files)} files)"
        )
    if readme is not None:
        base = readme.resolve().parent
        links = {
            env.name: Path(os.path.relpath(env.loaded.path.resolve(), base)).as_posix()
            for env in envs
            if env.loaded.path is not None
        }
        typed = " ".join(str(s) for s in specs)
        readme.write_text(render_readme(data, links, specs=typed, readme=str(readme)), encoding="utf-8")
        typer.echo(f"envbuilder: wrote {readme}")
