"""``create_app``: the FastAPI application serving a list of environments over ORS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from envbuilder import __version__
from envbuilder.environment import Environment
from envbuilder.errors import RequestError
from envbuilder.server._calls import CallRegistry
from envbuilder.server._sessions import SessionStore

log = logging.getLogger("envbuilder.server")

#: First path segments that are never redirected to the default environment.
ROOT_PATHS = frozenset(
    {
        "health",
        "ping",
        "list_environments",
        "create",
        "delete",
        "create_session",
        "delete_session",
        "version",
        "docs",
        "redoc",
        "openapi.json",
        "catalog",
    }
)


@dataclass(frozen=True)
class ServerSettings:
    """Tunables of a server (all have the reference servers' defaults)."""

    session_timeout: float = 900.0
    """Seconds without a request after which a session is deleted."""
    reap_interval: float = 5.0
    """How often idle sessions and expired call results are swept."""
    ping_interval: float = 10.0
    """Keep-alive comment interval on streaming tool calls."""
    call_linger: float = 60.0
    """How long a finished call's result can be replayed by ``task_id``."""


class State:
    """What the routes share: environments, sessions and calls (``app.state.ors``)."""

    def __init__(self, envs: list[Environment], settings: ServerSettings):
        if not envs:
            raise ValueError("a server needs at least one environment")
        self.envs: dict[str, Environment] = {}
        for env in envs:
            key = env.name.lower()
            if key in self.envs:
                raise ValueError(f"two environments are named {env.name!r}")
            self.envs[key] = env
        self.default = next(iter(self.envs))
        self.settings = settings
        self.sessions = SessionStore()
        self.calls = CallRegistry(settings.call_linger)
        self.locks: dict[str, asyncio.Lock] = {}

    def env(self, name: str) -> Environment:
        env = self.envs.get(name.lower())
        if env is None:
            raise RequestError(404, f"unknown environment {name!r}")
        return env

    def delete(self, sid: str) -> None:
        self.sessions.delete(sid)
        self.locks.pop(sid, None)

    def reap(self) -> None:
        for sid in self.sessions.idle(self.settings.session_timeout):
            log.info("session expired after %.0f s without requests", self.settings.session_timeout)
            self.delete(sid)
        self.calls.evict()


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Compact JSON (pydantic models via their own serialiser, the rest via orjson)."""
    body = (
        content.model_dump_json().encode() if hasattr(content, "model_dump_json") else (orjson.dumps(content))
    )
    return Response(body, status_code=status, media_type="application/json", headers=headers)


class DefaultEnvRedirect:
    """308 any path whose first segment is neither a root path nor an environment to the
    default environment (both reference clients rely on it, PROTOCOL.md §1.2)."""

    def __init__(self, app: ASGIApp, state: State):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            first = path.strip("/").split("/", 1)[0].lower()
            if first not in ROOT_PATHS and first not in self.state.envs:
                location = f"/{self.state.default}{path}"
                if scope.get("query_string"):
                    location += "?" + scope["query_string"].decode("latin-1")
                await send(
                    {
                        "type": "http.response.start",
                        "status": 308,
                        "headers": [
                            (b"location", location.encode("latin-1")),
                            (b"content-length", b"0"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def _may_hold_secrets(error: dict[str, Any]) -> bool:
    value = error.get("input")
    return "secrets" in error.get("loc", ()) or (isinstance(value, dict) and "secrets" in value)


def create_app(envs: list[Environment], settings: ServerSettings | None = None) -> FastAPI:
    """The ORS application for ``envs`` (the first is the default environment)."""
    from envbuilder.server._catalog import router as catalog
    from envbuilder.server._discovery import router as discovery
    from envbuilder.server._episodes import router as episodes

    state = State(envs, settings or ServerSettings())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(state.settings.reap_interval)
                state.reap()

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()

    app = FastAPI(
        title="envbuilder",
        version=__version__,
        description="Environments served over the Open Reward Standard (ORS). "
        f"Environments: {', '.join(state.envs)}.",
        lifespan=lifespan,
    )
    app.state.ors = state

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> Response:
        return json_response({"detail": exc.message}, exc.status, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return json_response({"detail": exc.detail}, exc.status_code, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = [{k: v for k, v in e.items() if k != "url"} for e in exc.errors()]
        for e in errors:
            if _may_hold_secrets(e):
                e.pop("input", None)
            if "ctx" in e:
                e["ctx"] = {k: str(v) for k, v in e["ctx"].items()}
        return json_response({"detail": errors}, 422)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> Response:
        # Never echo the message: it may hold a secret. The log has the type and the route.
        log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path)
        return json_response({"detail": f"Internal Server Error ({type(exc).__name__})"}, 500)

    app.include_router(discovery)
    app.include_router(episodes)
    app.include_router(catalog)
    app.add_middleware(DefaultEnvRedirect, state=state)
    return app
