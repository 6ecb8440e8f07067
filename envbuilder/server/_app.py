"""``create_app``: the FastAPI application serving a list of environments over ORS."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.datastructures import Default
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from envbuilder._version import __version__
from envbuilder.environment import Environment
from envbuilder.errors import RequestRejected
from envbuilder.protocol import ErrorResponse
from envbuilder.server._context import ServerContext, ServerSettings
from envbuilder.server._doors import open_doors
from envbuilder.server._fast import FastFront
from envbuilder.server._headers import require_sid
from envbuilder.server._lifespan import server_lifespan
from envbuilder.server._reply import CLOSE, internal_error
from envbuilder.server._responses import ReplyResponse, json_response
from envbuilder.server._routes import MEANING, NO_HEADERS, ROUTES, Route


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
    return build_app(ServerContext(envs, settings or ServerSettings()))


def build_app(ctx: ServerContext) -> ORSApp:
    """The FastAPI application over ``ctx``, with the lean door in front (``app.front``).
    ``serve`` builds it while the lean door already answers (``_lazy``)."""
    app = ORSApp(
        title="envbuilder",
        version=__version__,
        description="Environments served over the Open Reward Standard (ORS). "
        f"Environments: {', '.join(ctx.envs)}.",
        lifespan=server_lifespan(ctx),
    )
    app.state.context = ctx
    _add_error_handlers(app)
    _add_routes(app, ctx)
    app.openapi = _openapi(app, ctx)  # type: ignore[method-assign]
    return app


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
        return ReplyResponse(internal_error(exc, request.method, request.url.path), CLOSE)


def _add_routes(app: ORSApp, ctx: ServerContext) -> None:
    """Both doors from the one route table (``_routes.ROUTES``): a FastAPI route for each, and
    the lean door in front that answers the same routes by the same handlers."""
    for route in ROUTES:
        app.add_api_route(
            route.path,
            _endpoint(route),
            methods=[route.method],
            name=route.name,
            description=inspect.cleandoc(route.handler.__doc__ or ""),
            tags=[route.tag],
            response_model=route.response_model,
            responses=_responses(route),
            response_class=StreamingResponse if route.events else Default(JSONResponse),
        )
    # Other harnesses' doors (`serve --door`): their own routes, answered by FastAPI; the lean
    # door learns their paths so it never takes them for an environment's name.
    doors = open_doors(ctx.settings.doors, list(ctx.envs.values()))
    for router in doors:
        app.include_router(router)
    routes = [*app.routes, *(route for router in doors for route in router.routes)]
    app.front = FastFront(ctx, app.fastapi_call, ROUTES, [getattr(r, "path", "") for r in routes])


async def _sid(x_session_id: Annotated[str | None, Header()] = None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent (checked before the body)."""
    return require_sid(x_session_id)


_SSE_OK: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}}}}


def _responses(route: Route) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` of a route: its error answers, all ``{"detail": "..."}``."""
    errors: dict[int | str, dict[str, Any]] = {
        s: {"model": ErrorResponse, "description": MEANING[s]} for s in route.errors
    }
    return {**_SSE_OK, **errors} if route.events else errors


def _endpoint(route: Route) -> Callable[..., Any]:
    """The FastAPI endpoint of ``route``: its parameters (path, ``X-Session-ID``, body, headers)
    declared for FastAPI to validate and document, then the route's handler."""
    handler = route.handler
    header_names = route.headers

    async def endpoint(
        request: Request, env_name: str = "", sid: str = "", body: Any = None, **headers: str | None
    ) -> Response:
        ctx: ServerContext = request.app.state.context
        sent = {k: v for k, v in headers.items() if v} if header_names else NO_HEADERS
        reply = await handler(ctx, env_name, sid, body, sent)
        return ReplyResponse(reply, interval=ctx.settings.ping_interval)

    kind = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("request", kind, annotation=Request)]
    if route.in_env:
        params.append(inspect.Parameter("env_name", kind, annotation=str))
    if route.sid:
        params.append(inspect.Parameter("sid", kind, annotation=Annotated[str, Depends(_sid)]))
    if route.body is not None:
        params.append(inspect.Parameter("body", kind, annotation=route.body))
    for name in header_names:
        params.append(inspect.Parameter(name, kind, default=None, annotation=Annotated[str | None, Header()]))
    endpoint.__signature__ = inspect.Signature(params, return_annotation=Response)  # type: ignore[attr-defined]
    endpoint.__name__ = endpoint.__qualname__ = route.name
    return endpoint


def _openapi(app: FastAPI, ctx: ServerContext) -> Callable[[], dict[str, Any]]:
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
                                "enum": list(ctx.envs),
                                "title": "Env Name",
                            }
        return app.openapi_schema  # type: ignore[return-value]

    return openapi
