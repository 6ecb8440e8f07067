"""``envbuilder serve SPEC…``: compile specs (files, folders of specs, packs) and serve them over ORS."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._port import port_taken
from envbuilder.cli._pull import EnvOption, RequireSignatureOption, TrustedKeyOption, resolve_targets


def serve(
    specs: Annotated[
        list[str],
        typer.Argument(
            help="Spec files (YAML), folders of specs, packs (.zip), or the URL of a published "
            "catalog.json or pack (https://, s3://, gs://, hf://); the first is the default."
        ),
    ],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535)] = 8080,
    session_timeout: Annotated[
        float, typer.Option(help="Seconds of inactivity after which a session is deleted.")
    ] = 900.0,
    access_log: Annotated[
        bool,
        typer.Option("--access-log", help="Log every request (off by default: it costs CPU per request)."),
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if any spec fails to load (default: serve the others).")
    ] = False,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where packs are extracted (default: $ENVBUILDER_CACHE_DIR or ~/.cache/envbuilder)."
        ),
    ] = None,
    # -- scale-out (issue 16) ----------------------------------------------------------------
    store: Annotated[
        str,
        typer.Option(
            envvar="ENVBUILDER_STORE",
            help="Where sessions live: memory (this process) or redis://host:port/db (shared by "
            "workers and replicas).",
        ),
    ] = "memory",
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes on this host (above 1 needs --store redis://).")
    ] = 1,
    pick: EnvOption = None,
    trusted_key: TrustedKeyOption = None,
    require_signature: RequireSignatureOption = False,
) -> None:
    """Serve the environments of SPECS over the ORS HTTP protocol."""
    import uvicorn

    from envbuilder.cli._catalog import load_or_exit
    from envbuilder.cli._workers import run_workers, store_problem
    from envbuilder.server import ServerSettings, create_app

    taken = port_taken(host, port)
    if taken is not None:
        typer.echo(f"error: {taken}. Stop it, or pass --port with a free port (0: any)", err=True)
        raise typer.Exit(1)
    problem = store_problem(store, workers)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    settings = ServerSettings(session_timeout=session_timeout, store=store)
    # Published catalogs and packs at URLs: pulled into the cache and verified, then served as local packs.
    local = resolve_targets(
        specs, envs=pick, cache_dir=cache_dir, trusted_key=trusted_key, require_signature=require_signature
    )
    envs = load_or_exit(local, strict=strict, cache_dir=cache_dir)
    if workers == 1:
        with fail_on_errors():
            app = create_app(envs, settings)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    for env in envs:
        typer.echo(f"envbuilder: serving {env.name} ({env.summary()} tasks)")
    typer.echo(
        f"envbuilder: listening on http://{host}:{port}  (try: curl http://{shown}:{port}/{envs[0].name}/splits)"
    )
    if workers > 1:
        typer.echo(f"envbuilder: {workers} workers, sessions in {store}")
        run_workers(
            local,
            strict=strict,
            cache_dir=cache_dir,
            settings=settings,
            workers=workers,
            host=host,
            port=port,
            access_log=access_log,
            log_level=log_level,
        )
        return
    uvicorn.run(app, host=host, port=port, access_log=access_log, log_level=log_level)
