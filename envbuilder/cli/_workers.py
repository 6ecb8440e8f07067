"""``serve --workers N``: N worker processes under uvicorn's supervisor (a dead worker is
restarted), every one on the shared session store. Each worker builds the app from the same
arguments, passed in the environment (uvicorn spawns fresh interpreters)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

CONFIG_VAR = "ENVBUILDER_WORKER_CONFIG"
STORE_VAR = "ENVBUILDER_STORE"


def store_problem(store: str, workers: int) -> str | None:
    """Why ``--store``/``--workers`` cannot run as given (None when they can)."""
    if store != "memory":
        from envbuilder.server import check_store_url

        return check_store_url(store)
    if workers > 1:
        return (
            f"--workers {workers} needs a shared session store: with the in-memory store each worker "
            "would hold its own sessions and answer 404 for the others'. Start Redis and pass "
            "--store redis://127.0.0.1:6379/0 (or set ENVBUILDER_STORE)."
        )
    return None


def run_workers(
    specs: list[Path],
    *,
    strict: bool,
    cache_dir: Path | None,
    settings: Any,
    workers: int,
    trust_code: bool = False,
    signed: list[Path] | None = None,
    **uvicorn: Any,
) -> None:
    """Serve with ``workers`` processes; ``uvicorn`` holds host, port and the logging options.
    Each worker loads the specs as the supervisor did: the same code trust (``--trust-code``,
    the packs whose signature verified)."""
    import uvicorn as _uvicorn

    from envbuilder.server import uvicorn_options

    os.environ[CONFIG_VAR] = json.dumps(
        {
            "specs": [str(p.resolve()) for p in specs],
            "strict": strict,
            "cache_dir": str(cache_dir) if cache_dir else None,
            "trust_code": trust_code,
            "signed": [str(p.resolve()) for p in signed or []],
            "settings": dataclasses.asdict(settings),
        }
    )
    _uvicorn.run(
        "envbuilder.cli._workers:worker_app",
        factory=True,
        workers=workers,
        **uvicorn,
        **uvicorn_options(settings, workers=workers),  # header limit, read timeout, connection cap
    )


def worker_app() -> Any:
    """The app of one worker (uvicorn's factory)."""
    from envbuilder.cli._catalog import load_or_exit
    from envbuilder.server import ServerSettings, serving_app, set_protocol_limits

    config = json.loads(os.environ[CONFIG_VAR])
    cache_dir = Path(config["cache_dir"]) if config["cache_dir"] else None
    envs = load_or_exit(
        [Path(p) for p in config["specs"]],
        strict=config["strict"],
        cache_dir=cache_dir,
        trust_code=config["trust_code"],
        signed=[Path(p) for p in config["signed"]],
    )
    settings = ServerSettings(**config["settings"])
    set_protocol_limits(settings)
    return serving_app(envs, settings)
