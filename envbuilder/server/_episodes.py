"""Session routes: create and delete sessions, serve the prompt, run tool calls over SSE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

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
from envbuilder.server import _ops, _sse
from envbuilder.server._discovery import respond
from envbuilder.server._state import State

router = APIRouter()

_SSE_ROUTE = {"response_class": StreamingResponse, "responses": {200: {"content": {"text/event-stream": {}}}}}


def _state(request: Request) -> State:
    return request.app.state.ors


async def require_sid(x_session_id: Annotated[str | None, Header()] = None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent (checked before the body)."""
    return _ops.require_sid(x_session_id)


Sid = Annotated[str, Depends(require_sid)]


@router.post("/create_session", tags=["sessions"], **_SSE_ROUTE)  # type: ignore[arg-type]
async def create_session() -> Response:
    """Mint a session id, as SSE (``task_id`` then an empty ``end``): both reference clients
    require this form, not the JSON the public spec text shows."""
    return _sse_response(_ops.create_session().body)


@router.post("/create", response_model=SidResponse, tags=["sessions"])
async def create(
    request: Request, sid: Sid, body: CreateRequest, x_secrets: Annotated[str | None, Header()] = None
) -> Response:
    """Start an episode on a task given by ``task_spec`` or by ``split`` and ``index``."""
    return respond(_ops.create(_state(request), sid, body, x_secrets))


@router.post("/ping", response_model=StatusResponse, tags=["sessions"])
async def ping(request: Request, sid: Sid) -> Response:
    """Keep a session alive (sessions idle for 15 minutes are deleted)."""
    return respond(_ops.ping(_state(request), sid))


@router.post("/delete", response_model=SidResponse, tags=["sessions"])
async def delete(request: Request, sid: Sid) -> Response:
    """End a session (idempotent)."""
    return respond(_ops.delete(_state(request), sid))


@router.post("/delete_session", response_model=SidResponse, tags=["sessions"])
async def delete_session(sid: Sid) -> Response:
    """Release a session id minted by ``/create_session`` (nothing is stored for it)."""
    return respond(_ops.delete_session(sid))


@router.get("/{env_name}/prompt", response_model=list[TextBlock | ImageBlock], tags=["episode"])
async def prompt(request: Request, sid: Sid) -> Response:
    """The task's prompt as content blocks."""
    return respond(_ops.prompt(_state(request), sid))


@router.get("/{env_name}/messages", response_model=list[Message], tags=["episode"])
async def messages(request: Request, sid: Sid) -> Response:
    """The task's prompt as a role-tagged conversation."""
    return respond(_ops.messages(_state(request), sid))


@router.get("/{env_name}/task_tools", response_model=ListToolsOutput, tags=["episode"])
async def task_tools(request: Request, sid: Sid) -> Response:
    """The tools of this session's task."""
    return respond(_ops.task_tools(_state(request), sid))


@router.post("/{env_name}/score_group", tags=["episode"])
async def score_group(request: Request, sid: Sid) -> Response:
    """Group scoring is not offered by envbuilder environments."""
    return respond(_ops.score_group(_state(request), sid))


def _sse_response(body: bytes) -> Response:
    return Response(body, media_type=_sse.MEDIA_TYPE, headers=_sse.HEADERS)


@router.post("/{env_name}/call", tags=["episode"], **_SSE_ROUTE)  # type: ignore[arg-type]
async def call(request: Request, sid: Sid, body: CallRequest) -> Response:
    """Run a tool. The answer is SSE: ``task_id``, then ``chunk``s and ``end`` carrying the
    JSON result (or ``error``). Re-POST with ``task_id`` to re-attach after a dropped
    connection; results stay replayable for 60 s."""
    state = _state(request)
    session = _ops.session_of(state, sid)
    task_id, result = _ops.start_call(state, session, body.name, body.input, body.task_id)
    if result is None:
        return _sse_response(_ops.UNKNOWN_TASK)
    if isinstance(result, bytes):
        return _sse_response(_sse.event("task_id", task_id) + result)
    if isinstance(result, asyncio.Future):
        return _stream(state.settings.ping_interval, task_id, result)
    frames = await result  # an ordinary call: it finishes without waiting on I/O
    return _sse_response(_sse.event("task_id", task_id) + frames)


def _stream(interval: float, task_id: str, fut: asyncio.Future[bytes]) -> Response:
    async def events() -> AsyncIterator[bytes]:
        yield _sse.event("task_id", task_id)
        while True:
            done, _ = await asyncio.wait({fut}, timeout=interval)
            if done:
                break
            yield _sse.ping()
        exc = fut.exception()
        if exc is None:
            yield fut.result()
        elif isinstance(exc, _ops.SessionDeleted):
            yield _sse.event("error", "Session deleted")
        else:
            yield _sse.event("error", type(exc).__name__)

    return StreamingResponse(events(), media_type=_sse.MEDIA_TYPE, headers=_sse.HEADERS)


__all__ = ["router"]
