"""Discovery routes: health, environments, tools, splits and tasks (no session needed)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from envbuilder._version import __version__
from envbuilder.protocol import (
    ErrorResponse,
    ListToolsOutput,
    NumTasksResponse,
    Split,
    SplitRequest,
    StatusResponse,
    TaskRangeRequest,
    TaskRequest,
    TaskResponse,
    TasksResponse,
    VersionResponse,
)
from envbuilder.server import _ops
from envbuilder.server._responses import ReplyResponse
from envbuilder.server._state import State

router = APIRouter()

_MEANING = {
    400: "Bad request: a missing or malformed header, an unknown split or index",
    401: "An API key is required",
    403: "Refused by the server's settings",
    404: "Unknown environment or session",
    410: "The session was deleted during the call",
    413: "The body is larger than the server takes",
    503: "The server is at a limit, its session store is unavailable, or it cannot render this task's "
    "prompt; retry after Retry-After",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error answers (all ``{"detail": "..."}``)."""
    return {s: {"model": ErrorResponse, "description": _MEANING[s]} for s in statuses}


DISCOVERY_ERRORS = errors(400, 401, 404, 413)


def _state(request: Request) -> State:
    return request.app.state.ors


@router.get("/health", response_model=StatusResponse, tags=["discovery"])
async def health(request: Request) -> Response:
    """Liveness: ``{"status":"ok"}``; 503 ``{"status":"unavailable","store":"down"}`` while a
    shared session store does not answer (``"out of memory"``, ``"read-only"``: it refuses writes)."""
    return ReplyResponse(await _ops.health(request.app.state.ors))


@router.get("/version", responses=DISCOVERY_ERRORS, response_model=VersionResponse, tags=["discovery"])
async def version() -> Response:
    """The envbuilder version serving this environment."""
    return ReplyResponse(_ops.json_reply({"version": __version__, "build_sha": None}))


@router.get("/list_environments", responses=DISCOVERY_ERRORS, response_model=list[str], tags=["discovery"])
async def list_environments(request: Request) -> Response:
    """Environment names, the default first."""
    return ReplyResponse(_ops.json_reply(list(_state(request).envs)))


@router.get(
    "/{env_name}/tools", responses=DISCOVERY_ERRORS, response_model=ListToolsOutput, tags=["discovery"]
)
async def list_tools(env_name: str, request: Request) -> Response:
    """The tools every task of the environment offers."""
    state = _state(request)
    return ReplyResponse(_ops.Reply(state.tools_json[state.env(env_name).name.lower()]))


@router.get("/{env_name}/splits", responses=DISCOVERY_ERRORS, response_model=list[Split], tags=["discovery"])
async def list_splits(env_name: str, request: Request) -> Response:
    """The splits with their types."""
    state = _state(request)
    return ReplyResponse(_ops.Reply(state.splits_json[state.env(env_name).name.lower()]))


@router.post(
    "/{env_name}/num_tasks", responses=DISCOVERY_ERRORS, response_model=NumTasksResponse, tags=["discovery"]
)
async def num_tasks(env_name: str, body: SplitRequest, request: Request) -> Response:
    """How many tasks a split has (from metadata: no rows are read)."""
    return ReplyResponse(_ops.num_tasks(_state(request), env_name, body.split))


@router.post("/{env_name}/task", responses=DISCOVERY_ERRORS, response_model=TaskResponse, tags=["discovery"])
async def get_task(env_name: str, body: TaskRequest, request: Request) -> Response:
    """One task by index (negative indices count from the end)."""
    return ReplyResponse(_ops.get_task(_state(request), env_name, body.split, body.index))


@router.post(
    "/{env_name}/task_range", responses=DISCOVERY_ERRORS, response_model=TasksResponse, tags=["discovery"]
)
async def get_task_range(env_name: str, body: TaskRangeRequest, request: Request) -> Response:
    """Tasks ``start:stop`` with Python slice semantics (both omitted: the whole split); long
    ranges are streamed, so listing a 100,000-task split holds one batch in memory."""
    state = _state(request)
    span = _ops.task_range_span(state, env_name, body.split, body.start, body.stop)
    if len(span) <= _ops.TASK_PAGE:
        return ReplyResponse(_ops.get_task_range(state, env_name, body.split, body.start, body.stop))
    return StreamingResponse(
        _ops.stream_tasks(state, env_name, body.split, span), media_type="application/json"
    )


@router.post(
    "/{env_name}/tasks", responses=DISCOVERY_ERRORS, response_model=TasksResponse, tags=["discovery"]
)
async def list_tasks(env_name: str, body: SplitRequest, request: Request) -> Response:
    """Every task of a split, streamed in batches so other requests are not held up."""
    state = _state(request)
    span = range(len(_ops.split_of(state.env(env_name), body.split)))
    return StreamingResponse(
        _ops.stream_tasks(state, env_name, body.split, span), media_type="application/json"
    )
