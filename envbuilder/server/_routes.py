"""The one route table: every ORS route once — method, path, request model, handler, the headers
it reads, and how the OpenAPI document describes it. Both doors are built from it: the FastAPI
app (``_app``: OpenAPI, full validation, error shapes) and the lean ASGI door (``_fast``).

A handler is called the same way by both doors, ``handler(ctx, env, sid, body, headers)``:

* ``env``: the ``{env_name}`` of the path ("" for a route without one);
* ``sid``: the ``X-Session-ID`` header, checked (:func:`_headers.require_sid`), when the route
  takes one (``sid=True``), else "";
* ``body``: the request body validated by the route's model (``body=``), else None;
* ``headers``: the optional headers the route reads (``headers=``) that the request sent, by
  their Python names (``x_secrets``).

It returns a :class:`Reply` or raises :class:`RequestRejected`; what the route does is in
``_ops``, ``_tool_calls`` and ``_catalog``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from envbuilder.protocol import (
    CallRequest,
    CreateRequest,
    ErrorResponse,
    ImageBlock,
    ListToolsOutput,
    Message,
    NumTasksResponse,
    SidResponse,
    Split,
    SplitRequest,
    StatusResponse,
    TaskRangeRequest,
    TaskRequest,
    TaskResponse,
    TasksResponse,
    TextBlock,
    VersionResponse,
)
from envbuilder.server import _catalog, _ops, _tool_calls
from envbuilder.server._context import ServerContext
from envbuilder.server._reply import Reply

Headers = Mapping[str, str]
Handler = Callable[[ServerContext, str, str, Any, Headers], Awaitable[Reply]]


@dataclass(frozen=True, slots=True)
class Route:
    """One ORS route, as both doors serve it."""

    method: str
    path: str
    """``/name`` or ``/{env_name}/name``."""
    handler: Handler
    """Its name is the route's name (and OpenAPI operation); its docstring, the description."""
    body: type[BaseModel] | None = None
    """The JSON body's model (None: the body is not read)."""
    sid: bool = False
    """Whether the route needs ``X-Session-ID``."""
    headers: tuple[str, ...] = ()
    """Optional headers the handler reads, by Python name (``x_secrets`` is ``X-Secrets``)."""
    tag: str = "discovery"
    response_model: Any = None
    errors: tuple[int, ...] = ()
    """The error statuses the OpenAPI document lists (all ``{"detail": ...}``)."""
    events: bool = False
    """Answered as server-sent events (``text/event-stream``)."""

    @property
    def name(self) -> str:
        return self.handler.__name__

    @property
    def in_env(self) -> bool:
        """Whether the path is ``/{env_name}/...``."""
        return self.path.startswith("/{env_name}/")


NO_HEADERS: Headers = {}

MEANING = {
    400: "Bad request: a missing or malformed header, an unknown split or index",
    401: "An API key is required",
    403: "Refused by the server's settings",
    404: "Unknown environment or session",
    410: "The session was deleted during the call",
    413: "The body is larger than the server takes",
    503: "The server is at a limit, its session store is unavailable, or it cannot render this task's "
    "prompt; retry after Retry-After",
}
"""What each error status means, for the OpenAPI document."""


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error answers (all ``{"detail": "..."}``)."""
    return {s: {"model": ErrorResponse, "description": MEANING[s]} for s in statuses}


# -- handlers, in the order of the OpenAPI document ------------------------------------------------
# (the arguments every handler takes: ctx, env, sid, body, headers; see the module docstring)


async def health(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Liveness: ``{"status":"ok"}``; 503 ``{"status":"unavailable","store":"down"}`` while a
    shared session store does not answer (``"out of memory"``, ``"read-only"``: it refuses writes)."""
    return await _ops.health(ctx)


async def version(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The envbuilder version serving this environment."""
    return _ops.version()


async def list_environments(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Environment names, the default first."""
    return _ops.list_environments(ctx)


async def list_tools(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The tools every task of the environment offers."""
    return _ops.list_tools(ctx, env)


async def list_splits(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The splits with their types."""
    return _ops.list_splits(ctx, env)


async def num_tasks(ctx: ServerContext, env: str, sid: str, body: SplitRequest, headers: Headers) -> Reply:
    """How many tasks a split has (from metadata: no rows are read)."""
    return _ops.num_tasks(ctx, env, body.split)


async def get_task(ctx: ServerContext, env: str, sid: str, body: TaskRequest, headers: Headers) -> Reply:
    """One task by index (negative indices count from the end)."""
    return _ops.get_task(ctx, env, body.split, body.index)


async def get_task_range(
    ctx: ServerContext, env: str, sid: str, body: TaskRangeRequest, headers: Headers
) -> Reply:
    """Tasks ``start:stop`` with Python slice semantics (both omitted: the whole split); long
    ranges are streamed, so listing a 100,000-task split holds one batch in memory."""
    return _ops.get_task_range(ctx, env, body.split, body.start, body.stop)


async def list_tasks(ctx: ServerContext, env: str, sid: str, body: SplitRequest, headers: Headers) -> Reply:
    """Every task of a split, streamed in batches so other requests are not held up."""
    return _ops.list_tasks(ctx, env, body.split)


async def create_session(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Mint a session id, as SSE (``task_id`` then an empty ``end``): both reference clients
    require this form, not the JSON the public spec text shows."""
    return _ops.create_session()


async def create(ctx: ServerContext, env: str, sid: str, body: CreateRequest, headers: Headers) -> Reply:
    """Start an episode on a task given by ``task_spec`` or by ``split`` and ``index``, in the
    environment ``env_name`` names (else the one ``X-Deployment`` names, else the default)."""
    return await _ops.create(ctx, sid, body, headers.get("x_secrets"), headers.get("x_deployment"))


async def ping(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Keep a session alive (sessions idle for 15 minutes are deleted)."""
    return await _ops.ping(ctx, sid)


async def delete(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """End a session (idempotent)."""
    return await _ops.delete(ctx, sid)


async def delete_session(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Release a session id minted by ``/create_session`` (nothing is stored for it)."""
    return _ops.delete_session(sid)


async def prompt(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The task's prompt as content blocks."""
    return await _ops.prompt(ctx, sid)


async def messages(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The task's prompt as a role-tagged conversation."""
    return await _ops.messages(ctx, sid)


async def task_tools(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """The tools of this session's task."""
    return await _ops.task_tools(ctx, sid)


async def score_group(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Group scoring is not offered by envbuilder environments."""
    return await _ops.score_group(ctx, sid)


async def call(ctx: ServerContext, env: str, sid: str, body: CallRequest, headers: Headers) -> Reply:
    """Run a tool. The answer is SSE: ``task_id``, then ``chunk``s and ``end`` carrying the
    JSON result (or ``error``). Re-POST with ``task_id`` to re-attach after a dropped
    connection; results stay replayable for 60 s."""
    return await _tool_calls.call(ctx, sid, body)


async def catalog(ctx: ServerContext, env: str, sid: str, body: Any, headers: Headers) -> Reply:
    """Every served environment: metadata, content hash, splits, tools, graders, a sample prompt."""
    return await _catalog.catalog(ctx)


_DISCOVERY_ERRORS = (400, 401, 404, 413)
_SESSION_ERRORS = (400, 401, 404, 413)
_PROMPT_ERRORS = (400, 401, 404, 413, 503)

ROUTES: tuple[Route, ...] = (
    Route("GET", "/health", health, response_model=StatusResponse),
    Route("GET", "/version", version, response_model=VersionResponse, errors=_DISCOVERY_ERRORS),
    Route("GET", "/list_environments", list_environments, response_model=list[str], errors=_DISCOVERY_ERRORS),
    Route("GET", "/{env_name}/tools", list_tools, response_model=ListToolsOutput, errors=_DISCOVERY_ERRORS),
    Route("GET", "/{env_name}/splits", list_splits, response_model=list[Split], errors=_DISCOVERY_ERRORS),
    Route(
        "POST",
        "/{env_name}/num_tasks",
        num_tasks,
        body=SplitRequest,
        response_model=NumTasksResponse,
        errors=_DISCOVERY_ERRORS,
    ),
    Route(
        "POST",
        "/{env_name}/task",
        get_task,
        body=TaskRequest,
        response_model=TaskResponse,
        errors=_DISCOVERY_ERRORS,
    ),
    Route(
        "POST",
        "/{env_name}/task_range",
        get_task_range,
        body=TaskRangeRequest,
        response_model=TasksResponse,
        errors=_DISCOVERY_ERRORS,
    ),
    Route(
        "POST",
        "/{env_name}/tasks",
        list_tasks,
        body=SplitRequest,
        response_model=TasksResponse,
        errors=_DISCOVERY_ERRORS,
    ),
    Route("POST", "/create_session", create_session, tag="sessions", errors=(401, 413), events=True),
    Route(
        "POST",
        "/create",
        create,
        body=CreateRequest,
        sid=True,
        headers=("x_secrets", "x_deployment"),
        tag="sessions",
        response_model=SidResponse,
        errors=(400, 401, 403, 404, 413, 503),
    ),
    Route(
        "POST", "/ping", ping, sid=True, tag="sessions", response_model=StatusResponse, errors=_SESSION_ERRORS
    ),
    Route(
        "POST",
        "/delete",
        delete,
        sid=True,
        tag="sessions",
        response_model=SidResponse,
        errors=_SESSION_ERRORS,
    ),
    Route(
        "POST",
        "/delete_session",
        delete_session,
        sid=True,
        tag="sessions",
        response_model=SidResponse,
        errors=_SESSION_ERRORS,
    ),
    Route(
        "GET",
        "/{env_name}/prompt",
        prompt,
        sid=True,
        tag="episode",
        response_model=list[TextBlock | ImageBlock],
        errors=_PROMPT_ERRORS,
    ),
    Route(
        "GET",
        "/{env_name}/messages",
        messages,
        sid=True,
        tag="episode",
        response_model=list[Message],
        errors=_PROMPT_ERRORS,
    ),
    Route(
        "GET",
        "/{env_name}/task_tools",
        task_tools,
        sid=True,
        tag="episode",
        response_model=ListToolsOutput,
        errors=_SESSION_ERRORS,
    ),
    Route("POST", "/{env_name}/score_group", score_group, sid=True, tag="episode", errors=_SESSION_ERRORS),
    Route(
        "POST",
        "/{env_name}/call",
        call,
        body=CallRequest,
        sid=True,
        tag="episode",
        errors=(400, 401, 404, 410, 413),
        events=True,
    ),
    Route("GET", "/catalog", catalog),
)
"""Every ORS route, in the order of the OpenAPI document."""
