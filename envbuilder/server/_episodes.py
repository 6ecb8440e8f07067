"""Session routes: create and delete sessions, serve the prompt, run tool calls over SSE."""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import Response, StreamingResponse

from envbuilder.environment import Environment, Episode
from envbuilder.errors import RequestError, TaskNotFound, TemplateError
from envbuilder.protocol import (
    CallRequest,
    CreateRequest,
    ListToolsOutput,
    Message,
    SidResponse,
    StatusResponse,
    TextBlock,
)
from envbuilder.server import _sse
from envbuilder.server._app import State, json_response
from envbuilder.server._sessions import Session

router = APIRouter()

_OK = b'{"status":"ok"}'


def _state(request: Request) -> State:
    return request.app.state.ors


async def require_sid(x_session_id: Annotated[str | None, Header()] = None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent (checked before the body)."""
    sid = (x_session_id or "").strip()
    if not sid:
        raise RequestError(400, "X-Session-ID header is required")
    return sid


Sid = Annotated[str, Depends(require_sid)]


def _session(request: Request, sid: str) -> Session:
    state = _state(request)
    session = state.sessions.get(sid)
    if session is None:
        raise RequestError(404, "Active environment not found")
    state.sessions.touch(session)
    return session


def _secrets(header: str | None, body: dict[str, str] | None) -> dict[str, str]:
    """Secrets from the body (ors-sdk) and from ``X-Secrets`` (openreward): base64 of
    ``{name: {"value": str, "allowed_domains": [...]}}`` (plain string values accepted too)."""
    secrets = dict(body or {})
    if header:
        try:
            decoded = orjson.loads(base64.b64decode(header, validate=True))
            if not isinstance(decoded, dict):
                raise ValueError
            for name, item in decoded.items():
                value = item.get("value") if isinstance(item, dict) else item
                if not isinstance(value, str):
                    raise ValueError
                secrets[str(name)] = value
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            # Say what is wrong without echoing anything of the header.
            raise RequestError(
                400,
                "X-Secrets header is invalid: expected base64 of a JSON object "
                '{"NAME": {"value": "...", "allowed_domains": [...]}}',
            ) from None
    return secrets


@router.post(
    "/create_session",
    tags=["sessions"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def create_session() -> Response:
    """Mint a session id, as SSE (``task_id`` then an empty ``end``): both reference clients
    require this form, not the JSON the public spec text shows."""
    body = _sse.event("task_id", str(uuid.uuid4())) + _sse.event("end", "")
    return Response(body, media_type=_sse.MEDIA_TYPE, headers=_sse.HEADERS)


@router.post("/create", response_model=SidResponse, tags=["sessions"])
async def create(
    request: Request,
    sid: Sid,
    body: CreateRequest,
    x_secrets: Annotated[str | None, Header()] = None,
) -> Response:
    """Start an episode on a task given by ``task_spec`` or by ``split`` and ``index``."""
    state = _state(request)
    if state.sessions.get(sid) is not None:
        raise RequestError(400, "Session already exists")
    env = state.env(body.env_name) if body.env_name else state.envs[state.default]
    if body.toolset_name is not None:
        raise RequestError(400, f"unknown toolset {body.toolset_name!r}; this environment has no toolsets")
    if body.task_spec is not None:
        task = body.task_spec
    else:
        assert body.split is not None and body.index is not None
        try:
            split = env.split(body.split)
        except TaskNotFound:
            raise RequestError(400, "Invalid split") from None
        try:
            task = split.task(body.index)
        except TaskNotFound:
            raise RequestError(400, "Invalid index") from None
    secrets = _secrets(x_secrets, body.secrets)
    state.sessions.put(Session(sid=sid, env=env.name.lower(), episode=Episode(task=task, secrets=secrets)))
    return json_response({"sid": sid})


@router.post("/ping", response_model=StatusResponse, tags=["sessions"])
async def ping(request: Request, sid: Sid) -> Response:
    """Keep a session alive (sessions idle for 15 minutes are deleted)."""
    _session(request, sid)
    return Response(_OK, media_type="application/json")


@router.post("/delete", response_model=SidResponse, tags=["sessions"])
async def delete(request: Request, sid: Sid) -> Response:
    """End a session (idempotent)."""
    _state(request).delete(sid)
    return json_response({"sid": sid})


@router.post("/delete_session", response_model=SidResponse, tags=["sessions"])
async def delete_session(sid: Sid) -> Response:
    """Release a session id minted by ``/create_session`` (nothing is stored for it)."""
    return json_response({"sid": sid})


def _env_of(request: Request, session: Session) -> Environment:
    # Session routes ignore the path's env segment: the session knows its environment.
    return _state(request).envs[session.env]


def _render(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except TemplateError as exc:
        raise RequestError(500, str(exc)) from None


@router.get("/{env_name}/prompt", response_model=list[TextBlock], tags=["episode"])
async def prompt(request: Request, sid: Sid) -> Response:
    """The task's prompt as content blocks."""
    session = _session(request, sid)
    blocks = _render(_env_of(request, session).prompt, session.episode.task)
    return Response(
        b"[" + b",".join(b.model_dump_json().encode() for b in blocks) + b"]",
        media_type="application/json",
    )


@router.get("/{env_name}/messages", response_model=list[Message], tags=["episode"])
async def messages(request: Request, sid: Sid) -> Response:
    """The task's prompt as a role-tagged conversation."""
    session = _session(request, sid)
    msgs = _render(_env_of(request, session).messages, session.episode.task)
    return Response(
        b"[" + b",".join(m.model_dump_json().encode() for m in msgs) + b"]",
        media_type="application/json",
    )


@router.get("/{env_name}/task_tools", response_model=ListToolsOutput, tags=["episode"])
async def task_tools(request: Request, sid: Sid) -> Response:
    """The tools of this session's task."""
    session = _session(request, sid)
    return json_response(_env_of(request, session).tools_listing)


@router.post("/{env_name}/score_group", tags=["episode"])
async def score_group(request: Request, sid: Sid) -> Response:
    """Group scoring is not offered by envbuilder environments."""
    session = _session(request, sid)
    raise RequestError(404, f"Environment {session.env!r} does not implement score_group")


def _sse_response(body: bytes) -> Response:
    return Response(body, media_type=_sse.MEDIA_TYPE, headers=_sse.HEADERS)


@router.post(
    "/{env_name}/call",
    tags=["episode"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def call(request: Request, sid: Sid, body: CallRequest) -> Response:
    """Run a tool. The answer is SSE: ``task_id``, then ``chunk``s and ``end`` carrying the
    JSON result (or ``error``). Re-POST with ``task_id`` to re-attach after a dropped
    connection; results stay replayable for 60 s."""
    state = _state(request)
    session = _session(request, sid)
    if body.task_id is not None:
        return _reattach(state, body.task_id)
    env = _env_of(request, session)
    task_id = uuid.uuid4().hex
    work = _run(state, session, env, body.name, body.input)
    if not env.blocking:
        frames = await work
        state.calls.finished(task_id, frames)
        return _sse_response(_sse.event("task_id", task_id) + frames)
    return _stream(state, task_id, state.calls.start(task_id, work))


async def _run(
    state: State, session: Session, env: Environment, name: str, tool_input: dict[str, Any]
) -> bytes:
    """Run one call under the session's lock; the result as SSE frames after ``task_id``."""
    lock = state.locks.setdefault(session.sid, asyncio.Lock())
    async with lock:
        if state.sessions.get(session.sid) is not session:
            return _sse.event("error", "Session deleted")
        try:
            result = await env.call_tool(session.episode, name, tool_input)
        except Exception as exc:  # a bug in a tool: report it on the stream, keep serving
            return _sse.event("error", f"{type(exc).__name__} while running {name!r}")
        state.sessions.put(session)
    return _sse.result_events(result.model_dump_json())


def _reattach(state: State, task_id: str) -> Response:
    found = state.calls.lookup(task_id)
    if found is None:
        return _sse_response(_sse.event("error", "unknown task_id"))
    if isinstance(found, bytes):
        return _sse_response(_sse.event("task_id", task_id) + found)
    return _stream(state, task_id, found)


def _stream(state: State, task_id: str, fut: asyncio.Future[bytes]) -> Response:
    interval = state.settings.ping_interval

    async def events() -> AsyncIterator[bytes]:
        yield _sse.event("task_id", task_id)
        while True:
            done, _ = await asyncio.wait({fut}, timeout=interval)
            if done:
                break
            yield _sse.ping()
        exc = fut.exception()
        yield fut.result() if exc is None else _sse.event("error", type(exc).__name__)

    return StreamingResponse(events(), media_type=_sse.MEDIA_TYPE, headers=_sse.HEADERS)
