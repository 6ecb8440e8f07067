"""``create_app``: the FastAPI application serving a list of environments over ORS."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from envbuilder import __version__
from envbuilder.environment import Environment
from envbuilder.errors import RequestRejected
from envbuilder.server import _ops
from envbuilder.server._catalog import router as catalog
from envbuilder.server._discovery import router as discovery
from envbuilder.server._doors import open_doors
from envbuilder.server._episodes import router as episodes
from envbuilder.server._fast import FastFront
from envbuilder.server._responses import ReplyResponse, json_response
from envbuilder.server._state import ServerSettings, State


class ORSApp(FastAPI):
    """The FastAPI application, entered through the lean front door (``_fast.FastFront``)."""

    front: FastFront

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)  # type: ignore[arg-type]

    async def fastapi_call(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)


def _small(value: Any) -> bool:
    return isinstance(value, int | float) and abs(value) < 2**63


def _located(error: Any) -> dict[str, Any]:
    """A validation error without its input, its context values as text."""
    out = {"type": error["type"], "loc": list(error["loc"]), "msg": error["msg"]}
    if error.get("ctx"):
        ctx = error["ctx"].items()
        out["ctx"] = {k: v if isinstance(v, str | bool) or _small(v) else str(v) for k, v in ctx}
    return jsonable_encoder(out)


def create_app(envs: list[Environment], settings: ServerSettings | None = None) -> FastAPI:
    """The ORS application for ``envs`` (the first is the default environment)."""
    state = State(envs, settings or ServerSettings())
    app = ORSApp(
        title="envbuilder",
        version=__version__,
        description="Environments served over the Open Reward Standard (ORS). "
        f"Environments: {', '.join(state.envs)}.",
        lifespan=_lifespan(state),
    )
    app.state.ors = state
    _add_error_handlers(app)
    _add_routes(app, state)
    app.openapi = _openapi(app, state)  # type: ignore[method-assign]
    return app


def _lifespan(state: State) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Start the reaper; on shutdown stop it, finish the calls in flight and close everything."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(state.settings.reap_interval)
                state.reap()

        # Everything built so far lives as long as the server: keep it out of the GC's scans.
        gc.collect()
        gc.freeze()
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await state.drain()
            for env in state.envs.values():
                await env.aclose()
            await state.sessions.aclose()

    return lifespan


def _add_error_handlers(app: FastAPI) -> None:
    """The one JSON error shape, ``{"detail": ...}``, for every error a request can meet."""

    @app.exception_handler(RequestRejected)
    async def _request_error(request: Request, exc: RequestRejected) -> Response:
        return json_response({"detail": exc.message}, exc.status, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return json_response({"detail": exc.detail}, exc.status_code, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        # Never the input: it may be the whole body (100 MB), hold secrets, or not be JSON.
        errors = [_located(e) for e in exc.errors()]
        return json_response({"detail": errors}, 422)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> Response:
        return ReplyResponse(_ops.internal_error(exc, request.method, request.url.path), _ops.CLOSE)


def _add_routes(app: ORSApp, state: State) -> None:
    """Include the routers and build the front door from the same route declarations."""
    routers = (discovery, episodes, catalog, *open_doors(state.settings.doors, list(state.envs.values())))
    for router in routers:
        app.include_router(router)
    # The routes as declared (FastAPI includes routers lazily): the front door takes its
    # methods and paths from them.
    routes = [*app.routes, *(route for router in routers for route in router.routes)]
    app.front = FastFront(state, app.fastapi_call, routes)


def _openapi(app: FastAPI, state: State) -> Callable[[], dict[str, Any]]:
    """The OpenAPI schema with ``env_name`` limited to the served names (others are
    redirected to the default environment)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            for operations in schema["paths"].values():
                for operation in operations.values():
                    for param in operation.get("parameters", []):
                        if param["name"] == "env_name":
                            param["schema"] = {
                                "type": "string",
                                "enum": list(state.envs),
                                "title": "Env Name",
                            }
        return app.openapi_schema  # type: ignore[return-value]

    return openapi
