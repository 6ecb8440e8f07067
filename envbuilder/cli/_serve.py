"""``envbuilder serve SPEC``: compile a spec and serve it over ORS with uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors


def serve(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to serve.")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    session_timeout: Annotated[
        float, typer.Option(help="Seconds of inactivity after which a session is deleted.")
    ] = 900.0,
    access_log: Annotated[
        bool,
        typer.Option("--access-log", help="Log every request (off by default: it costs CPU per request)."),
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve the environment of SPEC over the ORS HTTP protocol."""
    import uvicorn

    from envbuilder.environment import load_environment
    from envbuilder.server import ServerSettings, create_app

    with fail_on_errors():
        env = load_environment(spec)
    app = create_app([env], ServerSettings(session_timeout=session_timeout))
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    typer.echo(f"envbuilder: serving {env.name} ({env.summary()} tasks)")
    typer.echo(
        f"envbuilder: listening on http://{host}:{port}  (try: curl http://{shown}:{port}/{env.name}/splits)"
    )
    uvicorn.run(app, host=host, port=port, access_log=access_log, log_level=log_level)
