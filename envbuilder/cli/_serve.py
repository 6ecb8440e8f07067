"""``envbuilder serve SPEC…``: compile specs (files, folders of specs, packs) and serve them over ORS."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli._endpoints import (
    JudgeBaseUrlOption,
    JudgeKeyEnvOption,
    JudgeModelOption,
    NoCacheOption,
    UserBaseUrlOption,
    UserKeyEnvOption,
    UserModelOption,
    apply_endpoint_flags,
    describe,
)
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._port import port_taken
from envbuilder.cli._pull import (
    EnvOption,
    RequireSignatureOption,
    TrustCodeOption,
    TrustedKeyOption,
    resolve_targets,
)


def serve(
    specs: Annotated[
        list[str],
        typer.Argument(
            help="Spec files (YAML), folders of specs, packs (.zip), or the URL of a published "
            "catalog.json or pack (https://, s3://, gs://, hf://); the first is the default."
        ),
    ],
    host: Annotated[
        str, typer.Option(help="Interface to listen on (a public one needs --api-key or --public).")
    ] = "127.0.0.1",
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
    # -- access control and limits ----------------------------------------------------------
    api_key: Annotated[
        list[str] | None,
        typer.Option(
            help="A key clients must send (X-API-Key) on every route but /health; repeatable. "
            "Also read from $ENVBUILDER_API_KEYS (comma-separated). Prefer --api-key-file: "
            "command lines are visible to other users."
        ),
    ] = None,
    api_key_file: Annotated[
        Path | None, typer.Option(help="A file of API keys, one a line (# comments allowed).")
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="Allow a non-loopback --host without an API key.")
    ] = False,
    no_task_spec: Annotated[
        bool,
        typer.Option(
            "--no-task-spec", help="Refuse client-supplied task_spec: tasks only by split and index."
        ),
    ] = False,
    client_tasks: Annotated[
        bool,
        typer.Option(
            "--client-tasks",
            help="Grade tasks a client writes in task_spec (its own gold answer, under a client: id). "
            "A task_spec naming a served task is always graded against the served row.",
        ),
    ] = False,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body (413 beyond).", min=1)] = 1 << 20,
    max_sessions: Annotated[int, typer.Option(help="Sessions held at once (503 beyond).", min=1)] = 100_000,
    max_sessions_per_client: Annotated[
        int | None,
        typer.Option(
            help="Sessions one API key (or address, without keys) holds at once (429 beyond); "
            "default a quarter of --max-sessions (at least 64).",
            min=1,
        ),
    ] = None,
    max_connections: Annotated[
        int,
        typer.Option(
            help="Open connections, shared between client addresses (503 with Retry-After beyond).", min=1
        ),
    ] = 2048,
    max_connections_per_client: Annotated[
        int | None,
        typer.Option(
            help="Connections from one address (its idle ones are closed first); "
            "default a quarter of --max-connections (at least 64).",
            min=1,
        ),
    ] = None,
    header_timeout: Annotated[
        float,
        typer.Option(help="Seconds a client has to send a request's line and headers (408 beyond).", min=0.1),
    ] = 10.0,
    read_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to send a whole request.", min=0.1)
    ] = 30.0,
    data_root: Annotated[
        list[Path] | None,
        typer.Option(
            help="A folder every spec may read data, templates and images from, besides its own; repeatable."
        ),
    ] = None,
    graceful_timeout: Annotated[
        float, typer.Option(help="Seconds SIGTERM waits for running requests.", min=0)
    ] = 10.0,
    allow_unconfined_checkers: Annotated[
        bool,
        typer.Option(
            "--allow-unconfined-checkers",
            help="Serve graders that run answers as code (reasoning-gym families whose checker "
            "is eval) where bubblewrap cannot confine them: what an answer makes them run then "
            "runs on this host. Without it such a spec is refused at start-up.",
        ),
    ] = False,
    # -- session containers (issue 34) --------------------------------------------------------
    max_containers: Annotated[
        int | None,
        typer.Option(
            help="Session containers (a spec's sandbox:) run at once, warm ones included; a new "
            "session waits for a place, clients in turn, then gets 503 with Retry-After.",
            min=1,
        ),
    ] = None,
    warm_containers: Annotated[
        int,
        typer.Option(help="Containers kept created and started ahead of need, per environment.", min=0),
    ] = 0,
    container_wait: Annotated[
        float, typer.Option(help="Seconds a new session waits for a container's place.", min=0)
    ] = 10.0,
    reap_interval: Annotated[
        float,
        typer.Option(
            help="Seconds between sweeps of idle sessions, warm containers and (with a shared "
            "store) containers whose session is gone.",
            min=0.1,
        ),
    ] = 5.0,
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
    door: Annotated[
        list[str] | None,
        typer.Option(
            help="Also serve another harness's protocol: openenv (under /openenv: OpenEnv's "
            "WebSocket and HTTP reset/step/state), nemo-gym (a NeMo Gym resources server at the "
            "root, the task JSONL at /nemo_gym/tasks.jsonl; one environment); repeatable.",
        ),
    ] = None,
    pick: EnvOption = None,
    trusted_key: TrustedKeyOption = None,
    require_signature: RequireSignatureOption = False,
    trust_code: TrustCodeOption = False,
    user_base_url: UserBaseUrlOption = None,
    user_model: UserModelOption = None,
    user_api_key_env: UserKeyEnvOption = None,
    judge_base_url: JudgeBaseUrlOption = None,
    judge_model: JudgeModelOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Serve the environments of SPECS over the ORS HTTP protocol.

    A spec from your own folders runs its own code (`function` and `mcp` tools); a pack, a
    catalog's environment or anything in the cache does only with --trust-code, or when its
    signature verifies with --trusted-key.
    """
    with _collect_when_listening() as ready:
        from envbuilder.cli._catalog import load_or_exit
        from envbuilder.server import ServerSettings

        specs, keys = _preflight(specs, host, port, store, workers, strict, api_key, api_key_file, public)
        flagged = apply_endpoint_flags(  # before any spec loads: the workers inherit them too
            user_base_url,
            user_model,
            user_api_key_env,
            judge_base_url,
            judge_model,
            judge_api_key_env,
            no_cache,
        )
        # A served spec reads files only inside its folder, an extracted pack, or a --data-root
        # (worker processes started inside the block inherit the setting).
        from envbuilder import paths

        packs = (cache_dir or paths.cache_dir()) / "packs"
        with paths.contained([*(data_root or []), packs]):
            # Catalogs and packs at URLs: pulled into the cache and verified, then served as local packs.
            local, signed = resolve_targets(
                specs,
                envs=pick,
                cache_dir=cache_dir,
                trusted_key=trusted_key,
                require_signature=require_signature,
            )
            envs = load_or_exit(
                local, strict=strict, cache_dir=cache_dir, trust_code=trust_code, signed=signed
            )
            settings = ServerSettings(
                session_timeout=session_timeout,
                store=store,
                api_keys=tuple(sorted(keys)),
                accept_task_spec=not no_task_spec,
                client_tasks=client_tasks,
                max_body_bytes=max_body_bytes,
                max_sessions=max_sessions,
                max_sessions_per_client=max_sessions_per_client,
                max_connections_per_client=max_connections_per_client,
                max_connections=max_connections,
                header_timeout=header_timeout,
                read_timeout=read_timeout,
                graceful_timeout=graceful_timeout,
                allow_unconfined_checkers=allow_unconfined_checkers,
                doors=tuple(door or ()),
                max_containers=max_containers,
                warm_containers=warm_containers,
                container_wait=container_wait,
                reap_interval=reap_interval,
            )
            trust = {"trust_code": trust_code, "signed": signed}
            for text in describe(envs, flagged):
                typer.echo(f"envbuilder: {text}")
            _listen(
                envs,
                local,
                settings,
                host,
                port,
                workers,
                strict,
                cache_dir,
                trust,
                access_log,
                log_level,
                ready,
            )


@contextlib.contextmanager
def _collect_when_listening() -> Iterator[Callable[[], None]]:
    """No cyclic garbage collection while the server starts (the imports, the specs' models, the
    application) until the function this yields is called, just before it listens, or the block
    ends. What is built by then lives as long as the server, and the server's first act is one
    full collection that sets it all aside (``gc.freeze`` in ``server_lifespan``): the
    collections the start's allocations trigger on the way (about 3 % of the instructions to
    listening) only scan the same objects earlier."""
    enabled = gc.isenabled()
    gc.disable()

    def ready() -> None:
        if enabled:
            gc.enable()

    try:
        yield ready
    finally:
        ready()


def _preflight(
    specs: list[str],
    host: str,
    port: int,
    store: str,
    workers: int,
    strict: bool,
    api_key: list[str] | None,
    api_key_file: Path | None,
    public: bool,
) -> tuple[list[str], list[str]]:
    """Everything checked before a spec loads, in the order a user needs to hear it: missing
    files, the store, the port, the API keys, the host's exposure. The specs left to serve and
    the keys; exits on a problem."""
    from envbuilder.cli._workers import store_problem
    from envbuilder.errors import EnvbuilderError
    from envbuilder.server import check_exposure, read_api_keys

    specs = _existing_targets(specs, strict=strict)  # a missing file is the first thing to say
    problem = store_problem(store, workers)  # (a usage error: said whatever the machine's state)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    taken = port_taken(host, port)
    if taken is not None:
        typer.echo(f"error: {taken}. Stop it, or pass --port with a free port (0: any)", err=True)
        raise typer.Exit(1)
    with fail_on_errors():
        keys = read_api_keys(api_key or [], api_key_file, os.environ.get("ENVBUILDER_API_KEYS"))
    try:
        warning = check_exposure(host, keys, public=public)
    except EnvbuilderError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if warning:
        typer.echo(f"envbuilder: warning: {warning}", err=True)
    return specs, list(keys)


def _listen(
    envs: list[Any],
    local: list[Path],
    settings: Any,
    host: str,
    port: int,
    workers: int,
    strict: bool,
    cache_dir: Path | None,
    trust: dict[str, Any],
    access_log: bool,
    log_level: str,
    ready: Callable[[], None],
) -> None:
    """Say what is served and where, then run uvicorn (one process, or ``workers``), calling
    ``ready`` just before."""
    import uvicorn

    from envbuilder.cli._workers import run_workers
    from envbuilder.server import check_doors, serving_app, uvicorn_options

    with fail_on_errors():
        doors = check_doors(settings.doors, envs)  # before the workers start: one message, once
        confinement = _confinement(envs, settings)
        if workers == 1:
            app = serving_app(envs, settings)  # listens before FastAPI is built
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    for env in envs:
        typer.echo(f"envbuilder: serving {env.name} ({env.summary()} tasks)")
    if confinement is not None and confinement.confined:
        typer.echo(f"envbuilder: {confinement.describe()}")
    elif confinement is not None:
        typer.echo(f"envbuilder: WARNING: {confinement.describe()} (--allow-unconfined-checkers)", err=True)
    typer.echo(
        f"envbuilder: listening on http://{host}:{port}  (try: curl http://{shown}:{port}/{envs[0].name}/splits)"
    )
    for door in doors:
        typer.echo(f"envbuilder: {door.name} door at http://{shown}:{port}{door.prefix or '/'}")
    if access_log and log_level == "warning":
        log_level = "info"  # uvicorn logs each request at info: --access-log alone must show them
    ready()
    if workers > 1:
        typer.echo(f"envbuilder: {workers} workers, sessions in {settings.store}")
        run_workers(
            local,
            strict=strict,
            cache_dir=cache_dir,
            settings=settings,
            workers=workers,
            **trust,
            host=host,
            port=port,
            access_log=access_log,
            log_level=log_level,
        )
        return
    uvicorn.run(
        app, host=host, port=port, access_log=access_log, log_level=log_level, **uvicorn_options(settings)
    )


def _confinement(envs: list[Any], settings: Any) -> Any:
    """Whether the checkers that evaluate answers run confined (None when none is served);
    raises SandboxError (why, and how to fix it) when they cannot and that was not allowed."""
    from envbuilder.isolation import processes

    evaluating = any(env.evaluates_answers for env in envs)
    return processes.serving_confinement(evaluating, settings.allow_unconfined_checkers)


def _existing_targets(specs: list[str], *, strict: bool) -> list[str]:
    """``specs`` without the local paths that do not exist, each reported; exit 1 when that
    leaves nothing to serve (or with ``--strict``)."""
    from envbuilder.data._remote import is_url

    missing = [s for s in specs if not is_url(s) and not Path(s).exists()]
    for target in missing:
        typer.echo(f"error: {target} was not loaded: no such file or folder. Check the path", err=True)
    if missing and (strict or len(missing) == len(specs)):
        everything = len(missing) == len(specs)
        why = "no environment loaded" if everything else f"{len(missing)} failed to load (--strict)"
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(1)
    return [s for s in specs if s not in missing]
