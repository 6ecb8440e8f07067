"""What each ORS route does, as plain functions over the server :class:`State`.

Both front doors call these: the FastAPI routes (full validation, OpenAPI, error shapes) and the
lean ASGI fast path that serves the ordinary requests of an episode (``_fast.py``). Each
returns a :class:`Reply` of pre-encoded bytes or raises :class:`RequestError`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import orjson

from envbuilder.data import SplitView
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import DataError, EnvbuilderError, RequestError, TaskNotFound
from envbuilder.protocol import CreateRequest
from envbuilder.server import _sse
from envbuilder.server._sessions import Session
from envbuilder.server._state import State

JSON = b"application/json"
SSE = _sse.MEDIA_TYPE.encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete response: status, body and its media type."""

    body: bytes
    media_type: bytes = JSON
    status: int = 200


HEALTH = Reply(b'{"status":"ok"}')
OK = HEALTH


def json_reply(content: Any, status: int = 200) -> Reply:
    """Compact JSON (pydantic models through their own serialiser, the rest through orjson)."""
    if hasattr(content, "model_dump_json"):
        return Reply(content.model_dump_json().encode(), JSON, status)
    return Reply(orjson.dumps(content), JSON, status)


def models_reply(items: list[Any]) -> Reply:
    return Reply(b"[" + b",".join(m.model_dump_json().encode() for m in items) + b"]")


# -- discovery ------------------------------------------------------------------------------------


def split_of(env: Environment, name: str) -> SplitView:
    try:
        return env.split(name)
    except TaskNotFound:
        raise RequestError(400, "Invalid split") from None


def num_tasks(state: State, env_name: str, split: str) -> Reply:
    return Reply(b'{"num_tasks":%d}' % len(split_of(state.env(env_name), split)))


def get_task(state: State, env_name: str, split: str, index: int) -> Reply:
    view = split_of(state.env(env_name), split)
    try:
        task = view.task(index)
    except TaskNotFound:
        raise RequestError(400, "Invalid index") from None
    return Reply(orjson.dumps({"task": task, "env_name": env_name}))


def get_task_range(state: State, env_name: str, split: str, start: int | None, stop: int | None) -> Reply:
    view = split_of(state.env(env_name), split)
    return Reply(orjson.dumps({"tasks": view.task_range(start, stop), "env_name": env_name}))


# -- sessions -------------------------------------------------------------------------------------


def create_session() -> Reply:
    return Reply(_sse.event("task_id", str(uuid.uuid4())) + _sse.event("end", ""), SSE)


def require_sid(header: str | None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent."""
    sid = (header or "").strip()
    if not sid:
        raise RequestError(400, "X-Session-ID header is required")
    return sid


def session_of(state: State, sid: str) -> Session:
    session = state.sessions.get(sid)
    if session is None:
        raise RequestError(404, "Active environment not found")
    state.sessions.touch(session)
    return session


def parse_secrets(header: str | None, body: dict[str, str] | None) -> dict[str, str]:
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


def create(state: State, sid: str, body: CreateRequest, x_secrets: str | None) -> Reply:
    if state.sessions.get(sid) is not None:
        raise RequestError(400, "Session already exists")
    env = state.env(body.env_name) if body.env_name else state.envs[state.default]
    if body.toolset_name is not None:
        raise RequestError(400, f"unknown toolset {body.toolset_name!r}; this environment has no toolsets")
    if body.task_spec is not None:
        task = body.task_spec
        try:
            env.check_task(task)
        except DataError as exc:
            raise RequestError(400, str(exc)) from None
    else:
        assert body.split is not None and body.index is not None
        try:
            task = split_of(env, body.split).task(body.index)
        except TaskNotFound:
            raise RequestError(400, "Invalid index") from None
    secrets = parse_secrets(x_secrets, body.secrets)
    state.sessions.put(Session(sid=sid, env=env.name.lower(), episode=Episode(task=task, secrets=secrets)))
    return Reply(orjson.dumps({"sid": sid}))


def ping(state: State, sid: str) -> Reply:
    session_of(state, sid)
    return OK


def delete(state: State, sid: str) -> Reply:
    state.delete(sid)
    return Reply(orjson.dumps({"sid": sid}))


def delete_session(sid: str) -> Reply:
    return Reply(orjson.dumps({"sid": sid}))


# -- an episode -----------------------------------------------------------------------------------


def _render(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except EnvbuilderError as exc:  # a template or the task's data cannot be rendered
        raise RequestError(500, str(exc)) from None


def prompt(state: State, sid: str) -> Reply:
    session = session_of(state, sid)
    return models_reply(_render(state.envs[session.env].prompt, session.episode.task))


def messages(state: State, sid: str) -> Reply:
    """The conversation so far: the prompt, then each tool call and its result."""
    session = session_of(state, sid)
    return models_reply(_render(state.envs[session.env].conversation, session.episode))


def task_tools(state: State, sid: str) -> Reply:
    session = session_of(state, sid)
    env = state.envs[session.env]
    if env.toolbox.varies:  # some tools exist only for some tasks (`only_for`)
        return json_reply(env.task_tools(session.episode.task))
    return Reply(state.task_tools_json[session.env])


def score_group(state: State, sid: str) -> Reply:
    session = session_of(state, sid)
    raise RequestError(404, f"Environment {session.env!r} does not implement score_group")


class SessionDeleted(Exception):
    """The session was deleted while a call waited for it."""


async def run_call(state: State, session: Session, name: str, tool_input: dict[str, Any]) -> bytes:
    """Run one tool call under the session's lock; the SSE frames that follow ``task_id``."""
    lock = state.locks.get(session.sid)
    if lock is None:
        lock = state.locks[session.sid] = asyncio.Lock()
    async with lock:
        if state.sessions.get(session.sid) is not session:
            raise SessionDeleted
        env = state.envs[session.env]
        try:
            result = await env.call_tool(session.episode, name, tool_input)
        except Exception as exc:  # a bug in a tool: report it on the stream, keep serving
            return _sse.event("error", f"{type(exc).__name__} while running {name!r}")
        state.sessions.put(session)
    return _sse.result_events(result.model_dump_json())


def start_call(
    state: State, session: Session, name: str, tool_input: dict[str, Any], task_id: str | None
) -> tuple[str, Awaitable[bytes] | bytes | None]:
    """Begin a ``/call``: its task id and either the finished frames (bytes), a future of them
    (a running call re-attached to, or a blocking one), a coroutine of them (an ordinary call),
    or None for an unknown ``task_id``."""
    if task_id is not None:
        found = state.calls.lookup(task_id)
        return task_id, found
    task_id = uuid.uuid4().hex
    work = run_call(state, session, name, tool_input)
    if state.envs[session.env].is_blocking(name):
        return task_id, state.calls.start(task_id, work)
    return task_id, _recorded(state, task_id, work)


async def _recorded(state: State, task_id: str, work: Awaitable[bytes]) -> bytes:
    try:
        frames = await work
    except SessionDeleted:
        raise RequestError(410, "Session deleted") from None
    state.calls.finished(task_id, frames)
    return frames


UNKNOWN_TASK = _sse.event("error", "unknown task_id")
