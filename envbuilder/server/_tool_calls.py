"""Tool calls (``/call``): one at a time per session under its lock, saved with the episode,
streamed while they run, re-attached to by ``task_id``, and taken over from a worker that died
(shared store)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable
from typing import Any

from envbuilder import deadlines
from envbuilder.errors import RequestRejected
from envbuilder.protocol import CallRequest
from envbuilder.server import _sse
from envbuilder.server._calls import SHUTTING_DOWN
from envbuilder.server._context import ServerContext
from envbuilder.server._ops import NO_SESSION, session_of
from envbuilder.server._owners import owned
from envbuilder.server._reply import SSE, Reply
from envbuilder.server._sessions import SessionRecord, call_key


class SessionDeleted(Exception):
    """The session was deleted while a call waited for it."""


SAVE_TRIES = 8
"""Saves lost to concurrent calls on one session before a call gives up with 503."""


def _outcome(result: Any) -> str | None:
    output = getattr(result, "output", None)
    return output.metadata.get("outcome") if output is not None and output.metadata else None


async def run_call(
    ctx: ServerContext, session: SessionRecord, name: str, tool_input: dict[str, Any], call: str
) -> bytes:
    """Run one tool call under the session's lock and save the episode with the call's result
    (kept as ``call``, :func:`call_key`); the SSE frames that follow its ``task_id``. A save
    lost to a call on another worker (the store's version check) re-reads the session and runs
    the call again on it."""
    key = session.key
    lock = ctx.locks.get(key)
    if lock is None:
        lock = ctx.locks[key] = asyncio.Lock()
    store = ctx.sessions
    async with lock:
        current = await store.latest(session)
        for _ in range(SAVE_TRIES):
            if current is None:
                raise SessionDeleted
            try:
                # Shared grading queues (processes, sandbox slots) serve clients in turn; a
                # session runs one call at a time (this lock), so it holds one place at most.
                with deadlines.party(current.client or current.sid):
                    result = await ctx.envs[current.env].call_tool(current.episode, name, tool_input)
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


def streamed(ctx: ServerContext, session: SessionRecord, name: str) -> bool:
    """Whether a new call on ``session`` is answered as a stream (``task_id`` first, then keep-
    alive pings): a grader that waits on I/O, or any call with a shared store, where a client
    whose worker dies re-attaches to the call on another worker (which replays or takes it over)."""
    return ctx.sessions.shared or ctx.envs[session.env].is_blocking(name)


async def call(ctx: ServerContext, sid: str, request: CallRequest) -> Reply:
    """A ``/call``'s reply: ``task_id`` then the result's frames; streamed (``rest``) while a
    blocking or shared-store call runs (keep-alive pings, ``_stream``)."""
    task_id, result = await open_call(ctx, sid, request.name, request.input, request.task_id)
    if result is None:
        return Reply(UNKNOWN_TASK, SSE)
    first = _sse.event("task_id", task_id)
    if isinstance(result, asyncio.Future):
        # A call that may wait runs as a task of its own. Its first step runs before this
        # reply is sent (the task was scheduled first), and most such calls end there (a math
        # answer decided without SymPy, a verdict already known, a judge's cached grade): that
        # one is answered whole, as an ordinary call is, instead of streamed over three writes
        # and three more turns of a busy loop. One that waits streams: task_id now, pings, the
        # rest when done.
        await asyncio.sleep(0)
        if not result.done():
            return Reply(first, SSE, rest=result)
        return Reply(first + final_frames(result), SSE)
    frames = result if isinstance(result, bytes) else await result  # an ordinary call finishes at once
    return Reply(first + frames, SSE)


async def open_call(
    ctx: ServerContext, sid: str, name: str, tool_input: dict[str, Any], task_id: str | None
) -> tuple[str, Awaitable[bytes] | bytes | None]:
    """Resolve a ``/call``'s session and begin the call (see :func:`start_call`). With a shared
    store a new call is read, announced and leased in one round trip."""
    if task_id is None and ctx.sessions.shared:
        task_id = uuid.uuid4().hex
        key = owned(sid)
        call = call_key(key, task_id)
        session = await ctx.sessions.begin(key, call, name, tool_input)
        if session is None:
            raise RequestRejected(404, NO_SESSION)
        return task_id, ctx.calls.start(call, _leased(ctx, session, name, tool_input, call, True))
    return await start_call(ctx, await session_of(ctx, sid), name, tool_input, task_id)


async def start_call(
    ctx: ServerContext, session: SessionRecord, name: str, tool_input: dict[str, Any], task_id: str | None
) -> tuple[str, Awaitable[bytes] | bytes | None]:
    """Begin a ``/call``: its task id and either the finished frames (bytes), a future of them
    (a running call re-attached to, or a blocking one), a coroutine of them (an ordinary call),
    or None for a ``task_id`` this session has no call by (:func:`call_key`)."""
    if task_id is not None:
        return task_id, await _reattach(ctx, call_key(session.key, task_id))
    task_id = uuid.uuid4().hex
    call = call_key(session.key, task_id)
    if streamed(ctx, session, name):
        return task_id, ctx.calls.start(call, _leased(ctx, session, name, tool_input, call))
    return task_id, _ordinary(ctx, session, name, tool_input, call)


async def _ordinary(
    ctx: ServerContext, session: SessionRecord, name: str, tool_input: dict[str, Any], call: str
) -> bytes:
    try:
        return await run_call(ctx, session, name, tool_input, call)
    except SessionDeleted:
        raise RequestRejected(410, "Session deleted") from None


async def _leased(
    ctx: ServerContext,
    session: SessionRecord,
    name: str,
    tool_input: dict[str, Any],
    call: str,
    claimed: bool = False,
) -> bytes:
    """A call a client may re-attach to, from any worker of a shared store: announced with a
    lease (unless ``claimed`` already) that is renewed while it runs (``_redis``)."""
    store = ctx.sessions
    if not claimed:
        await store.claim(call, session.key, name, tool_input)
    if not (store.shared and ctx.envs[session.env].is_blocking(name)):  # the others finish at once
        return await run_call(ctx, session, name, tool_input, call)

    async def renew() -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW)
            with contextlib.suppress(RequestRejected):
                await store.renew(call)

    renewer = asyncio.ensure_future(renew())
    try:
        return await run_call(ctx, session, name, tool_input, call)
    finally:
        renewer.cancel()


async def _reattach(ctx: ServerContext, call: str) -> Awaitable[bytes] | bytes | None:
    running = ctx.calls.running(call)
    if running is not None:
        return running
    frames = await ctx.sessions.result(call)
    if frames is not None or not ctx.sessions.shared:
        return frames
    pending = await ctx.sessions.pending(call)
    if pending is None:
        return await ctx.sessions.result(call)  # ended since the look above, or never was
    return ctx.calls.start(call, _follow(ctx, call, pending))


async def _follow(ctx: ServerContext, call: str, pending: Any) -> bytes:
    """Wait for a call running on another worker; take it over when its worker is gone (its
    lease lapsed): run it again on the session as last saved, so its attempt counts once."""
    store = ctx.sessions
    while True:
        if pending is None:
            # It ended between the look at its result and the look at its lease (its worker
            # saves the one and drops the other at once): the result is there now.
            frames = await store.result(call)
            return UNKNOWN_TASK if frames is None else frames
        if pending.ours:
            frames = await store.result(call)  # saved just before its worker died?
            if frames is not None:
                return frames
            session = await store.get(pending.sid)
            if session is None:
                raise SessionDeleted
            return await _leased(ctx, session, pending.name, pending.input, call)
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
    """The last frames of a streamed call, once ``fut`` is done (an error event if it failed,
    or if the server stopped it: :meth:`CallRegistry.stop`)."""
    if fut.cancelled():
        return _sse.event("error", SHUTTING_DOWN)
    exc = fut.exception()
    if exc is None:
        return fut.result()
    if isinstance(exc, SessionDeleted):
        return _sse.event("error", "Session deleted")
    if isinstance(exc, RequestRejected):
        return _sse.event("error", exc.message)
    return _sse.event("error", type(exc).__name__)
