"""The application ``serve`` runs: the lean door answers from the moment the server listens, and
the FastAPI application is built meanwhile in a thread.

Importing FastAPI and building its routes (their models, validators and the OpenAPI models) is
about half of a server's start-up, and the routes every episode takes never use it: the lean
door (``_fast``) answers them from the one route table. So ``serve`` does not wait for it. The
server starts (:func:`server_lifespan`), starts the build in a thread and listens; a request the
lean door hands to FastAPI (the OpenAPI document and docs, a body that needs FastAPI's exact
422, an unknown route, a door's WebSocket) waits for the build and is then answered by the same
application ``create_app`` builds, so nothing a client sees differs, only when. A request never
meets a half-built application: it waits for the whole one (or, should the build fail, gets the
one answer to an unexpected error).

The first segments of the FastAPI routes (which a request's path is checked against before it is
taken for an environment's name) are known without FastAPI: the route table's paths and
FastAPI's own documentation paths (a test compares them with those of the built application).
A server with another harness's door (``--door``) builds FastAPI first, as ``create_app`` does:
those doors are FastAPI routers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import traceback
from typing import Any

from envbuilder.environment import Environment
from envbuilder.server._context import ServerContext, ServerSettings
from envbuilder.server._fast import FastFront
from envbuilder.server._lifespan import server_lifespan
from envbuilder.server._routes import ROUTES

FASTAPI_PATHS = ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")
"""The routes FastAPI adds by itself (its defaults, which ``build_app`` keeps)."""


class LazyApp:
    """ASGI application: the lean door now, the FastAPI application once it is built."""

    def __init__(self, ctx: ServerContext):
        self.ctx = ctx
        self.front = FastFront(ctx, self._fastapi, ROUTES, [*(r.path for r in ROUTES), *FASTAPI_PATHS])
        self.built: concurrent.futures.Future[Any] = concurrent.futures.Future()
        """The FastAPI application (``_app.ORSApp``), once built."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start building the FastAPI application (once; in a thread)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._build, name="envbuilder-fastapi", daemon=True)
                self._thread.start()

    def _build(self) -> None:
        try:
            from envbuilder.server._app import build_app

            app = build_app(self.ctx)
            # Like everything built before the server started: it lives as long as the server.
            gc.collect()
            gc.freeze()
        except BaseException as exc:
            self.built.set_exception(exc)
        else:
            self.built.set_result(app)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(scope, receive, send)
        await self.front(scope, receive, send)

    async def _fastapi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """What the lean door hands on: answered by the FastAPI application, once it is built."""
        if not self.built.done():
            self.start()  # (a server run without its lifespan starts the build here)
            await asyncio.wrap_future(self.built)
        await self.built.result().fastapi_call(scope, receive, send)

    async def _lifespan(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI's lifespan protocol around :func:`server_lifespan`, as Starlette's router runs it
        (its state into the scope's); the build starts once the server has started.

        A forced exit (a second Ctrl-C) skips the shutdown message and cancels this task: the
        server is stopped by then, so the cleanup runs and this returns without a report (not
        a failed shutdown, whose traceback uvicorn would log)."""
        started = False
        await receive()
        try:
            async with server_lifespan(self.ctx)(self) as state:
                if "state" in scope:
                    scope["state"].update(state)
                self.start()
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()
        except asyncio.CancelledError:
            if not started:
                raise
            return
        except BaseException:
            text = traceback.format_exc()
            await send(
                {
                    "type": "lifespan.shutdown.failed" if started else "lifespan.startup.failed",
                    "message": text,
                }
            )
            raise
        else:
            await send({"type": "lifespan.shutdown.complete"})


def serving_app(envs: list[Environment], settings: ServerSettings | None = None) -> Any:
    """The application ``serve`` runs for ``envs``: answers as :func:`create_app`'s does, but
    listens before FastAPI is imported (a :class:`LazyApp`), unless a door needs FastAPI's
    routers first."""
    ctx = ServerContext(envs, settings or ServerSettings())
    if ctx.settings.doors:
        from envbuilder.server._app import build_app

        return build_app(ctx)
    return LazyApp(ctx)
