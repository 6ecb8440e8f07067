"""Session routes: create and delete sessions, serve the prompt, run tool calls over SSE."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import Response, StreamingResponse

from envbuilder.protocol import (
    CallRequest,
    CreateRequest,
    ImageBlock,
    ListToolsOutput,
    Message,
    SidResponse,
    StatusResponse,
    TextBlock,
)
from envbuilder.server import _ops
from envbuilder.server._discovery import errors
from envbuilder.server._responses import ReplyResponse
from envbuilder.server._state import State

router = APIRouter()

#: Error answers of the session routes, for the OpenAPI document.
SESSION_ERRORS = errors(400, 401, 404, 413)
#: ... and of the routes that render the task's prompt.
PROMPT_ERRORS = errors(400, 401, 404, 413, 503)

_SSE_OK: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}}}}


def _state(request: Request) -> State:
    return request.app.state.ors


async def require_sid(x_session_id: Annotated[str | None, Header()] = None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent (checked before the body)."""
    return _ops.require_sid(x_session_id)


Sid = Annotated[str, Depends(require_sid)]


@router.post(
    "/create_session",
    tags=["sessions"],
    responses={**_SSE_OK, **errors(401, 413)},
    response_class=StreamingResponse,
)
async def create_session() -> Response:
    """Mint a session id, as SSE (``task_id`` then an empty ``end``): both reference clients
    require this form, not the JSON the public spec text shows."""
    return ReplyResponse(_ops.create_session())


@router.post(
    "/create", response_model=SidResponse, tags=["sessions"], responses=errors(400, 401, 403, 404, 413, 503)
)
async def create(
    request: Request,
    sid: Sid,
    body: CreateRequest,
    x_secrets: Annotated[str | None, Header()] = None,
    x_deployment: Annotated[str | None, Header()] = None,
) -> Response:
    """Start an episode on a task given by ``task_spec`` or by ``split`` and ``index``, in the
    environment ``env_name`` names (else the one ``X-Deployment`` names, else the default)."""
    return ReplyResponse(await _ops.create(_state(request), sid, body, x_secrets, x_deployment))


@router.post("/ping", responses=SESSION_ERRORS, response_model=StatusResponse, tags=["sessions"])
async def ping(request: Request, sid: Sid) -> Response:
    """Keep a session alive (sessions idle for 15 minutes are deleted)."""
    return ReplyResponse(await _ops.ping(_state(request), sid))


@router.post("/delete", responses=SESSION_ERRORS, response_model=SidResponse, tags=["sessions"])
async def delete(request: Request, sid: Sid) -> Response:
    """End a session (idempotent)."""
    return ReplyResponse(await _ops.delete(_state(request), sid))


@router.post("/delete_session", responses=SESSION_ERRORS, response_model=SidResponse, tags=["sessions"])
async def delete_session(sid: Sid) -> Response:
    """Release a session id minted by ``/create_session`` (nothing is stored for it)."""
    return ReplyResponse(_ops.delete_session(sid))


@router.get(
    "/{env_name}/prompt",
    responses=PROMPT_ERRORS,
    response_model=list[TextBlock | ImageBlock],
    tags=["episode"],
)
async def prompt(env_name: str, request: Request, sid: Sid) -> Response:
    """The task's prompt as content blocks."""
    return ReplyResponse(await _ops.prompt(_state(request), sid))


@router.get("/{env_name}/messages", responses=PROMPT_ERRORS, response_model=list[Message], tags=["episode"])
async def messages(env_name: str, request: Request, sid: Sid) -> Response:
    """The task's prompt as a role-tagged conversation."""
    return ReplyResponse(await _ops.messages(_state(request), sid))


@router.get(
    "/{env_name}/task_tools", responses=SESSION_ERRORS, response_model=ListToolsOutput, tags=["episode"]
)
async def task_tools(env_name: str, request: Request, sid: Sid) -> Response:
    """The tools of this session's task."""
    return ReplyResponse(await _ops.task_tools(_state(request), sid))


@router.post("/{env_name}/score_group", responses=SESSION_ERRORS, tags=["episode"])
async def score_group(env_name: str, request: Request, sid: Sid) -> Response:
    """Group scoring is not offered by envbuilder environments."""
    return ReplyResponse(await _ops.score_group(_state(request), sid))


@router.post(
    "/{env_name}/call",
    tags=["episode"],
    responses={**_SSE_OK, **errors(400, 401, 404, 410, 413)},
    response_class=StreamingResponse,
)
async def call(env_name: str, request: Request, sid: Sid, body: CallRequest) -> Response:
    """Run a tool. The answer is SSE: ``task_id``, then ``chunk``s and ``end`` carrying the
    JSON result (or ``error``). Re-POST with ``task_id`` to re-attach after a dropped
    connection; results stay replayable for 60 s."""
    state = _state(request)
    reply = await _ops.call(state, sid, body)
    return ReplyResponse(reply, interval=state.settings.ping_interval)


__all__ = ["router"]
