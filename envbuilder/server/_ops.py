"""What each ORS route does, as plain functions over the server :class:`State`.

Both front doors call these: the FastAPI routes (full validation, OpenAPI, error shapes) and the
lean ASGI fast path that serves the ordinary requests of an episode (``_fast.py``). Each
returns a :class:`Reply` of pre-encoded bytes or raises :class:`RequestRejected`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

import orjson

from envbuilder import budget
from envbuilder.data import SplitView, Task
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import DataError, EnvbuilderError, RequestRejected, TaskNotFound
from envbuilder.protocol import CallRequest, CreateRequest
from envbuilder.server import _sse
from envbuilder.server._owners import client_name, owned
from envbuilder.server._sessions import SessionRecord, call_key
from envbuilder.server._state import ServerSettings, State, log

JSON = b"application/json"
SSE = _sse.MEDIA_TYPE.encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete response: status, body and its media type."""

    body: bytes
    media_type: bytes = JSON
    status: int = 200
    rest: asyncio.Future[bytes] | None = None
    """A streamed reply: ``body`` is sent at once, the rest when this future is done."""
    headers: dict[str, str] | None = None
    """Headers besides the content type (``Retry-After``)."""


HEALTH = Reply(b'{"status":"ok"}')
OK = HEALTH


async def health(state: State) -> Reply:
    """Liveness; with a shared store, whether it answers and takes writes (503 with
    Retry-After and what is wrong while it does not); where a checker that evaluates answers is
    served, whether it runs confined (``"confinement": "bubblewrap"`` or ``"off"``)."""
    if state.sessions.shared and not await state.sessions.healthy():
        problem = getattr(state.sessions, "problem", None) or "down"
        body = orjson.dumps({"status": "unavailable", "store": problem})
        return Reply(body, JSON, 503, headers={"retry-after": "1"})
    containers = {n: e.containers.report() for n, e in state.envs.items() if e.containers is not None}
    if containers:  # session containers: their start-up and idle costs (changes with each call)
        body_: dict[str, Any] = {"status": "ok", "containers": containers}
        if state.confinement is not None:
            body_["confinement"] = state.confinement.word
        return Reply(orjson.dumps(body_))
    return HEALTH if state.confinement is None else _health_with(state.confinement.word)


@functools.cache
def _health_with(confinement: str) -> Reply:
    return Reply(orjson.dumps({"status": "ok", "confinement": confinement}))


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
        raise RequestRejected(400, "Invalid split") from None


def num_tasks(state: State, env_name: str, split: str) -> Reply:
    return Reply(b'{"num_tasks":%d}' % len(split_of(state.env(env_name), split)))


def get_task(state: State, env_name: str, split: str, index: int) -> Reply:
    env = state.env(env_name)
    view = split_of(env, split)
    try:
        task = view.task(index)
    except TaskNotFound:
        raise RequestRejected(400, "Invalid index") from None
    if env.private_fields:
        state.served.record(env.name, task.get("id"), split, index % len(view))
        task = env.public(task)
    return Reply(orjson.dumps({"task": task, "env_name": env_name}))


TASK_PAGE = 1000
"""Ranges up to this many tasks are answered in one piece; longer ones are streamed in batches."""


def task_range_span(state: State, env_name: str, split: str, start: int | None, stop: int | None) -> range:
    """The indices ``start:stop`` selects (Python slice semantics); 400 saying how to page when
    there are more than the server lists at once."""
    view = split_of(state.env(env_name), split)
    span = range(len(view))[start:stop]
    cap = state.settings.max_task_range
    if len(span) > cap:
        raise RequestRejected(
            400,
            f"task_range lists at most {cap:,} tasks at once and this range has {len(span):,}: "
            f'page with start and stop ({{"start": {span.start}, "stop": {span.start + cap}}}, then '
            f'{{"start": {span.start + cap}, "stop": {span.start + 2 * cap}}}, ...), or stream /tasks',
        )
    return span


def get_task_range(state: State, env_name: str, split: str, start: int | None, stop: int | None) -> Reply:
    """A range of at most :data:`TASK_PAGE` tasks, whole (longer ones: :func:`stream_tasks`)."""
    span = task_range_span(state, env_name, split, start, stop)
    assert len(span) <= TASK_PAGE
    env = state.env(env_name)
    tasks = _public_page(state, env, split, span.start, span.stop)
    return Reply(orjson.dumps({"tasks": tasks, "env_name": env_name}))


def _public_page(state: State, env: Environment, split: str, start: int, stop: int) -> list[Task]:
    """Tasks ``start:stop`` of a split as clients see them: private fields left out, and each
    served id recorded so a task sent back to ``/create`` is found by it."""
    tasks = split_of(env, split).task_range(start, stop)
    if env.private_fields:
        for i, task in enumerate(tasks):
            state.served.record(env.name, task.get("id"), split, start + i)
        tasks = [env.public(t) for t in tasks]
    return tasks


async def stream_tasks(state: State, env_name: str, split: str, span: range) -> AsyncIterator[bytes]:
    """``{"tasks":[...],"env_name":...}`` for the tasks of ``span``, produced batch by batch:
    memory stays bounded by a batch whatever the split's size, and reading and encoding run in
    a worker thread so the event loop stays free."""
    env = state.env(env_name)
    batches = iter(range(span.start, span.stop, TASK_PAGE))

    def next_chunk() -> bytes | None:
        for lo in batches:
            tasks = _public_page(state, env, split, lo, min(span.stop, lo + TASK_PAGE))
            if tasks:
                return orjson.dumps(tasks)[1:-1]
        return None

    yield b'{"tasks":['
    first = True
    while (chunk := await asyncio.to_thread(next_chunk)) is not None:
        yield chunk if first else b"," + chunk
        first = False
    yield b'],"env_name":' + orjson.dumps(env_name) + b"}"


# -- sessions -------------------------------------------------------------------------------------


def create_session() -> Reply:
    return Reply(_sse.event("task_id", str(uuid.uuid4())) + _sse.event("end", ""), SSE)


MAX_SID = 128
"""Longest ``X-Session-ID`` (a UUID is 36 characters)."""


def require_sid(header: str | None) -> str:
    """The ``X-Session-ID`` header, stripped; 400 when absent, too long or not printable ASCII."""
    sid = (header or "").strip()
    if not sid:
        raise RequestRejected(400, "X-Session-ID header is required")
    if len(sid) > MAX_SID or not sid.isascii() or not sid.isprintable():
        raise RequestRejected(400, f"X-Session-ID must be at most {MAX_SID} printable ASCII characters")
    return sid


async def session_of(state: State, sid: str) -> SessionRecord:
    """The running request's client's session ``sid`` (its timeout renewed); 404 when unknown,
    which is what another client's session is (:func:`owned`)."""
    session = await state.sessions.get(owned(sid))
    if session is None:
        raise RequestRejected(404, NO_SESSION)
    return session


NO_SESSION = "Active environment not found"
"""The answer to a session this client does not have (none by that id, or another's)."""


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
            raise RequestRejected(
                400,
                "X-Secrets header is invalid: expected base64 of a JSON object "
                '{"NAME": {"value": "...", "allowed_domains": [...]}}',
            ) from None
    return secrets


async def create(
    state: State, sid: str, body: CreateRequest, x_secrets: str | None, x_deployment: str | None = None
) -> Reply:
    """Start a session. Its environment: the body's ``env_name``, else the one ``X-Deployment``
    names (how the openreward client names it), else the default environment."""
    settings = state.settings
    if body.env_name:
        env = state.env(body.env_name)
    else:
        env = state.envs[(state.deployment(x_deployment) if x_deployment else None) or state.default]
    if body.toolset_name is not None:
        raise RequestRejected(400, f"unknown toolset {body.toolset_name!r}; this environment has no toolsets")
    if body.task_spec is not None:
        if not settings.accept_task_spec:
            raise RequestRejected(403, "this server takes tasks only by split and index, not task_spec")
        if len(orjson.dumps(body.task_spec)) > settings.max_task_spec_bytes:
            limit = settings.max_task_spec_bytes
            raise RequestRejected(413, f"task_spec is larger than {limit:,} bytes of JSON")
        task = _served_task(state, env, body.task_spec)
        if task is None:
            task = _client_task(settings, body.task_spec)
        try:
            env.check_task(task)
        except DataError as exc:
            raise RequestRejected(400, str(exc)) from None
    else:
        assert body.split is not None and body.index is not None
        try:
            task = split_of(env, body.split).task(body.index)
        except TaskNotFound:
            raise RequestRejected(400, "Invalid index") from None
    secrets = parse_secrets(x_secrets, body.secrets)
    session = SessionRecord(
        sid=sid, env=env.name.lower(), episode=Episode(task=task, secrets=secrets), client=client_name()
    )  # stored under its creator's name (SessionRecord.key): another client's id never clashes
    if not await state.sessions.add(session, state.caps):
        raise RequestRejected(400, "Session already exists")
    return Reply(orjson.dumps({"sid": sid}))


def _served_task(state: State, env: Environment, task: Any) -> Any:
    """The served row a client's ``task_spec`` names by its id (as ``/task`` gave it), private
    fields included; None when it names none. The client's fields are never used for a
    served task: a gold answer it sends would be its own choice."""
    task_id = task.get("id")
    where = state.served.find(env.name, task_id)
    if where is not None:
        try:
            return env.split(where[0]).task(where[1])
        except TaskNotFound:
            pass
    return env.find_task(task_id)


CLIENT_ID_PREFIX = "client:"
"""Prefix of the id of a task a client wrote, so it never takes a served task's id."""


def is_client_task(task: Task) -> bool:
    """Whether ``task`` is one a client wrote (``--client-tasks``): its id is marked, or it has
    none (every served row has one)."""
    task_id = task.get("id")
    return task_id is None or str(task_id).startswith(CLIENT_ID_PREFIX)


def _client_task(settings: ServerSettings, task: Any) -> Any:
    """A task the client wrote, when the server takes those (``--client-tasks``), its id
    marked as the client's; else 403."""
    if not settings.client_tasks:
        raise RequestRejected(
            403,
            "task_spec names no task this environment serves (send a task as /task or /tasks "
            "returns it, id included); tasks a client writes are graded only on a server "
            "started with --client-tasks",
        )
    task_id = task.get("id")
    if task_id is not None and not str(task_id).startswith(CLIENT_ID_PREFIX):
        task = {**task, "id": f"{CLIENT_ID_PREFIX}{task_id}"}
    return task


async def ping(state: State, sid: str) -> Reply:
    await session_of(state, sid)
    return OK


async def delete(state: State, sid: str) -> Reply:
    """Delete the client's session ``sid``; idempotent (PROTOCOL.md E13), so another client's
    session gets what an unknown one gets: 200, and it is not deleted."""
    await state.delete(owned(sid))
    return Reply(orjson.dumps({"sid": sid}))


def delete_session(sid: str) -> Reply:
    return Reply(orjson.dumps({"sid": sid}))


# -- an episode -----------------------------------------------------------------------------------


async def _render(env: Environment, fn: Any, arg: Any, task: Task) -> Any:
    """Render on the loop when it takes bounded time, else on a worker thread (under the
    template's deadline), so a slow template never holds the other requests.

    A render that fails (past its budget, refused by the sandbox, or the task's data does not
    fit the template) is never a 500, which is kept for the server's own bugs:

    * on a served task it is the environment's failure, not the request's: 503 with
      Retry-After (a render past its time budget may pass on a less loaded server; both
      reference clients retry a 503, then give up with this detail). It is the ``/prompt``
      counterpart of a grade that cannot be computed, which is void, never 0;
    * on a task the client wrote (``--client-tasks``) its data is the client's: 422."""
    try:
        return fn(arg) if env.inline_prompt else await budget.offload(fn, arg)
    except EnvbuilderError as exc:  # a template or the task's data cannot be rendered
        if is_client_task(task):
            raise RequestRejected(
                422, f"the task_spec this session was created with cannot be rendered: {exc}"
            ) from None
        log.warning(
            "environment %s cannot render the prompt of task %r: %s", env.name, task.get("id"), exc.message
        )
        raise RequestRejected(
            503,
            f"the environment cannot render this task's prompt: {exc}. Its spec is at fault, not the "
            "request: retry later, or skip the task",
            headers={"Retry-After": RENDER_RETRY_AFTER},
        ) from None


RENDER_RETRY_AFTER = "5"
"""Seconds a client is asked to wait before asking again for a prompt that could not be rendered."""


async def prompt(state: State, sid: str) -> Reply:
    session = await session_of(state, sid)
    env = state.envs[session.env]
    return models_reply(await _render(env, env.prompt, session.episode.task, session.episode.task))


async def messages(state: State, sid: str) -> Reply:
    """The conversation so far: the prompt, then each tool call and its result."""
    session = await session_of(state, sid)
    env = state.envs[session.env]
    return models_reply(await _render(env, env.conversation, session.episode, session.episode.task))


async def task_tools(state: State, sid: str) -> Reply:
    session = await session_of(state, sid)
    env = state.envs[session.env]
    if env.toolbox.varies:  # some tools exist only for some tasks (`only_for`)
        return json_reply(env.task_tools(session.episode.task))
    return Reply(state.task_tools_json[session.env])


async def score_group(state: State, sid: str) -> Reply:
    session = await session_of(state, sid)
    raise RequestRejected(404, f"Environment {session.env!r} does not implement score_group")


class SessionDeleted(Exception):
    """The session was deleted while a call waited for it."""


SAVE_TRIES = 8
"""Saves lost to concurrent calls on one session before a call gives up with 503."""


def _outcome(result: Any) -> str | None:
    output = getattr(result, "output", None)
    return output.metadata.get("outcome") if output is not None and output.metadata else None


async def run_call(
    state: State, session: SessionRecord, name: str, tool_input: dict[str, Any], call: str
) -> bytes:
    """Run one tool call under the session's lock and save the episode with the call's result
    (kept as ``call``, :func:`call_key`); the SSE frames that follow its ``task_id``. A save
    lost to a call on another worker (the store's version check) re-reads the session and runs
    the call again on it."""
    key = session.key
    lock = state.locks.get(key)
    if lock is None:
        lock = state.locks[key] = asyncio.Lock()
    store = state.sessions
    async with lock:
        current = await store.latest(session)
        for _ in range(SAVE_TRIES):
            if current is None:
                raise SessionDeleted
            try:
                # Shared grading queues (processes, sandbox slots) serve clients in turn; a
                # session runs one call at a time (this lock), so it holds one place at most.
                with budget.party(current.client or current.sid):
                    result = await state.envs[current.env].call_tool(current.episode, name, tool_input)
            except Exception as exc:  # a bug in a tool: report it on the stream, keep serving
                frames = _sse.event("error", f"{type(exc).__name__} while running {name!r}")
                await store.record(call, frames)
                return frames
            frames = _sse.result_events(result.model_dump_json())
            if await store.save(current, call, frames, _outcome(result)):
                return frames
            if not store.shared:
                raise SessionDeleted  # in memory a save fails only for a deleted (or replaced) session
            current = await store.get(key)
    raise RequestRejected(503, "too many concurrent calls on this session", headers={"Retry-After": "1"})


def streamed(state: State, session: SessionRecord, name: str) -> bool:
    """Whether a new call on ``session`` is answered as a stream (``task_id`` first, then keep-
    alive pings): a grader that waits on I/O, or any call with a shared store, where a client
    whose worker dies re-attaches to the call on another worker (which replays or takes it over)."""
    return state.sessions.shared or state.envs[session.env].is_blocking(name)


async def call(state: State, sid: str, request: CallRequest) -> Reply:
    """A ``/call``'s reply: ``task_id`` then the result's frames; streamed (``rest``) while a
    blocking or shared-store call runs (keep-alive pings, ``_stream``)."""
    task_id, result = await open_call(state, sid, request.name, request.input, request.task_id)
    if result is None:
        return Reply(UNKNOWN_TASK, SSE)
    first = _sse.event("task_id", task_id)
    if isinstance(result, asyncio.Future):  # streamed: task_id now, the rest when done
        return Reply(first, SSE, rest=result)
    frames = result if isinstance(result, bytes) else await result  # an ordinary call finishes at once
    return Reply(first + frames, SSE)


async def open_call(
    state: State, sid: str, name: str, tool_input: dict[str, Any], task_id: str | None
) -> tuple[str, Awaitable[bytes] | bytes | None]:
    """Resolve a ``/call``'s session and begin the call (see :func:`start_call`). With a shared
    store a new call is read, announced and leased in one round trip."""
    if task_id is None and state.sessions.shared:
        task_id = uuid.uuid4().hex
        key = owned(sid)
        call = call_key(key, task_id)
        session = await state.sessions.begin(key, call, name, tool_input)
        if session is None:
            raise RequestRejected(404, NO_SESSION)
        return task_id, state.calls.start(call, _leased(state, session, name, tool_input, call, True))
    return await start_call(state, await session_of(state, sid), name, tool_input, task_id)


async def start_call(
    state: State, session: SessionRecord, name: str, tool_input: dict[str, Any], task_id: str | None
) -> tuple[str, Awaitable[bytes] | bytes | None]:
    """Begin a ``/call``: its task id and either the finished frames (bytes), a future of them
    (a running call re-attached to, or a blocking one), a coroutine of them (an ordinary call),
    or None for a ``task_id`` this session has no call by (:func:`call_key`)."""
    if task_id is not None:
        return task_id, await _reattach(state, call_key(session.key, task_id))
    task_id = uuid.uuid4().hex
    call = call_key(session.key, task_id)
    if streamed(state, session, name):
        return task_id, state.calls.start(call, _leased(state, session, name, tool_input, call))
    return task_id, _ordinary(state, session, name, tool_input, call)


async def _ordinary(
    state: State, session: SessionRecord, name: str, tool_input: dict[str, Any], call: str
) -> bytes:
    try:
        return await run_call(state, session, name, tool_input, call)
    except SessionDeleted:
        raise RequestRejected(410, "Session deleted") from None


async def _leased(
    state: State,
    session: SessionRecord,
    name: str,
    tool_input: dict[str, Any],
    call: str,
    claimed: bool = False,
) -> bytes:
    """A call a client may re-attach to, from any worker of a shared store: announced with a
    lease (unless ``claimed`` already) that is renewed while it runs (``_redis``)."""
    store = state.sessions
    if not claimed:
        await store.claim(call, session.key, name, tool_input)
    if not (store.shared and state.envs[session.env].is_blocking(name)):  # the others finish at once
        return await run_call(state, session, name, tool_input, call)

    async def renew() -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW)
            with contextlib.suppress(RequestRejected):
                await store.renew(call)

    renewer = asyncio.ensure_future(renew())
    try:
        return await run_call(state, session, name, tool_input, call)
    finally:
        renewer.cancel()


async def _reattach(state: State, call: str) -> Awaitable[bytes] | bytes | None:
    running = state.calls.running(call)
    if running is not None:
        return running
    frames = await state.sessions.result(call)
    if frames is not None or not state.sessions.shared:
        return frames
    pending = await state.sessions.pending(call)
    if pending is None:
        return None
    return state.calls.start(call, _follow(state, call, pending))


async def _follow(state: State, call: str, pending: Any) -> bytes:
    """Wait for a call running on another worker; take it over when its worker is gone (its
    lease lapsed): run it again on the session as last saved, so its attempt counts once."""
    store = state.sessions
    while True:
        if pending is None:
            return UNKNOWN_TASK
        if pending.ours:
            frames = await store.result(call)  # saved just before its worker died?
            if frames is not None:
                return frames
            session = await store.get(pending.sid)
            if session is None:
                raise SessionDeleted
            return await _leased(state, session, pending.name, pending.input, call)
        await asyncio.sleep(FOLLOW_POLL)
        frames = await store.result(call)
        if frames is not None:
            return frames
        pending = await store.pending(call)


LEASE_RENEW = 1.0
"""Seconds between renewals of a running call's lease (a third of ``_redis.LEASE_MS``)."""
FOLLOW_POLL = 0.1
"""Seconds between looks at a call running on another worker."""
UNKNOWN_TASK = _sse.event("error", "unknown task_id")


def final_frames(fut: asyncio.Future[bytes]) -> bytes:
    """The last frames of a streamed call, once ``fut`` is done (an error event if it failed)."""
    exc = fut.exception()
    if exc is None:
        return fut.result()
    if isinstance(exc, SessionDeleted):
        return _sse.event("error", "Session deleted")
    if isinstance(exc, RequestRejected):
        return _sse.event("error", exc.message)
    return _sse.event("error", type(exc).__name__)


# -- errors ---------------------------------------------------------------------------------------


def internal_error(exc: BaseException, method: str, path: str) -> Reply:
    """The one answer to an unexpected error, for both doors. Never the message (it may hold a
    secret): the log has the type and the route. Sent with ``Connection: close`` (see
    :data:`CLOSE`) so a client's next request starts on a fresh connection."""
    log.error("unhandled %s on %s %s", type(exc).__name__, method, path[:200])
    return Reply(orjson.dumps({"detail": f"Internal Server Error ({type(exc).__name__})"}), JSON, 500)


CLOSE = {"connection": "close"}
"""Headers of an answer after which the connection is closed (500, 413)."""


def error_reply(status: int, detail: str) -> Reply:
    return Reply(orjson.dumps({"detail": detail}), JSON, status)
