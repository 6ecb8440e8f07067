"""``envbuilder catalog SPEC…``: write catalog.json and a static site (and envs/README.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption, TrustedKeyOption, resolve_targets

if TYPE_CHECKING:
    from envbuilder.catalog import Collection
    from envbuilder.environment import Environment


def load_or_exit(
    paths: list[Path],
    *,
    strict: bool,
    cache_dir: Path | None = None,
    trust_code: bool = False,
    signed: list[Path] | None = None,
) -> list[Environment]:
    """Load every environment under ``paths``; report each failure on stderr and go on, unless
    ``strict``; exit 1 when a failure is fatal or nothing loaded. Code trust as in
    :func:`envbuilder.catalog.load_environments`."""
    return load_collection(
        paths, strict=strict, cache_dir=cache_dir, trust_code=trust_code, signed=signed
    ).envs


def load_collection(
    paths: list[Path],
    *,
    strict: bool,
    cache_dir: Path | None = None,
    why_fatal: str = " (--strict)",
    trust_code: bool = False,
    signed: list[Path] | None = None,
) -> Collection:
    """:func:`load_or_exit`, with the failures kept; ``why_fatal`` ends the message when the
    failures are fatal."""
    from envbuilder.catalog import load_environments

    with fail_on_errors():
        collection = load_environments(paths, cache_dir=cache_dir, trust_code=trust_code, signed=signed or [])
    for failure in collection.failures:
        typer.echo(f"error: {failure}", err=True)
    if collection.failures and strict:
        typer.echo(f"error: {len(collection.failures)} failed to load{why_fatal}", err=True)
        raise typer.Exit(1)
    if not collection.envs:
        typer.echo("error: no environment loaded", err=True)
        raise typer.Exit(1)
    return collection


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
    skip_broken: Annotated[
        bool,
        typer.Option(
            "--skip-broken",
            help="Catalog the specs that load and leave out those that fail (each is reported, "
            "and the summary says how many). Default: any failure exits 1 and nothing is written.",
        ),
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", hidden=True, help="The default now: any failure exits 1.")
    ] = False,
    results: Annotated[
        list[Path] | None,
        typer.Option(help="Run summaries of `envbuilder eval --out` (repeatable): a leaderboard per page."),
    ] = None,
    trusted_key: TrustedKeyOption = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Catalog the environments of SPECS; without --out or --readme, print catalog.json.

    Loading a spec runs its own code (`function` and `mcp` tools) only from your own folders;
    a pack's only with --trust-code or a signature that --trusted-key verifies.
    """
    from envbuilder.catalog import build_catalog, render_readme, write_site
    from envbuilder.paths import write_file

    local, signed = resolve_targets(
        [str(s) for s in specs], envs=None, cache_dir=None, trusted_key=trusted_key, require_signature=False
    )
    # A catalog or README written without an environment that failed to load would drop it
    # silently (a committed envs/README.md rewritten without it): failures are fatal by default.
    collection = load_collection(
        local,
        strict=strict or not skip_broken,
        why_fatal=": nothing written (fix it, or pass --skip-broken to catalog the others)",
        trust_code=trust_code,
        signed=signed,
    )
    envs = collection.envs
    skipped = [failure.path for failure in collection.failures]
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
        with fail_on_errors():
            files = write_site(data, out)
        typer.echo(
            f"envbuilder: catalogued {len(envs)} environment(s) in {out / 'index.html'} ({len(files)} files)"
            + _left_out(skipped)
        )
    if readme is not None:
        base = readme.resolve().parent
        links = {
            env.name: Path(os.path.relpath(env.loaded.path.resolve(), base)).as_posix()
            for env in envs
            if env.loaded.path is not None
        }
        typed = " ".join(str(s) for s in specs)
        with fail_on_errors():
            write_file(readme, render_readme(data, links, specs=typed, readme=str(readme)))
        typer.echo(f"envbuilder: wrote {readme}" + _left_out(skipped))


def _left_out(skipped: list[Path]) -> str:
    return f"; left out {len(skipped)} that failed to load: {', '.join(map(str, skipped))}" if skipped else ""
