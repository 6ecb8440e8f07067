"""An event loop in a thread: how synchronous code runs envbuilder's async code.

:class:`LoopThread` is one event loop running forever in a daemon thread; any thread hands it a
coroutine and waits for (or is given a future of) the result. The synchronous ORS client keeps
one per client (its session pings run there while the caller's thread is busy); the in-process
episodes of the trainers' adapters share one for callers that are inside a running loop already.
:func:`run_sync` is the entry point of synchronous code: a thread with no running loop runs the
coroutine on an event loop kept for that thread (no thread hop on the hot path, and connections
opened by a judge stay on the loop that opened them); a thread inside a running loop hands it to
the shared :class:`LoopThread`, so no loop is ever nested.

Most in-process episode calls (an exact-match grade, a calculator) never wait for anything, so
:func:`run_sync` starts the coroutine's task eagerly: it takes the task's first step off the
loop's ready queue and runs it at once, on this thread, with the loop set as the running loop
(what Python 3.12's eager tasks do inside a running loop). A coroutine that finishes in that
step costs no turn of the loop (no selector poll, no run/stop of ``run_forever``); one that
waits (a judge's HTTP call, a sandbox) goes on in the same task under
``loop.run_until_complete``. The task is a real :class:`asyncio.Task` from the start, so
``asyncio.current_task()``, ``asyncio.timeout``, cancellation and the task's copy of the
caller's context variables behave exactly as under ``run_until_complete``; only the task's own
step ever sends into the coroutine.

A caller that knows its coroutine never asks for the current task before it first waits (an
in-process answer graded by a grader that says so: ``Grader.task_free``) passes ``task=False``:
its first step then runs as a plain ``coro.send(None)`` in a copy of the caller's context, with
the loop set as running, and no task is made at all (a task, its handle on the ready queue and
its entry in asyncio's set of all tasks are most of what ``run_sync`` costs). If it waits, the
rest of it runs in a real task (in the same context) under ``run_until_complete``, so timeouts,
cancellation and ``current_task()`` hold from its first wait on; before that wait,
``current_task()`` is None, which is why this is the caller's promise to make, not a default.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections import deque
from collections.abc import Coroutine, Generator
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["LoopThread", "run_sync", "shared_loop"]

T = TypeVar("T")


class LoopThread:
    """An event loop running in its own daemon thread until :meth:`close`."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop (from async code: ``await asyncio.wrap_future(...)``)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (never from the loop's own thread)."""
        return self.submit(coro).result()

    def close(self) -> None:
        """Stop the loop, wait for its thread, close it (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


_lock = threading.Lock()
_shared: LoopThread | None = None
_local = threading.local()


def shared_loop() -> LoopThread:
    """The process's shared loop thread (started on first use)."""
    global _shared
    with _lock:
        if _shared is None or _shared.closed:
            _shared = LoopThread("envbuilder-integrations")
        return _shared


def run_sync(coro: Coroutine[Any, Any, T], *, task: bool = True) -> T:
    """Run ``coro`` to its end from synchronous code: on this thread's own loop, or on the
    shared loop when this thread is already running one.

    ``task=False`` is the caller's promise that ``coro`` does not ask for the current task
    (``asyncio.timeout``, anyio's cancel scopes) before it first waits: it then starts without
    one (see the module's docstring)."""
    # (asyncio's own test for a running loop, without the RuntimeError get_running_loop()
    # raises, and builds a message for, on every call from synchronous code)
    if asyncio._get_running_loop() is None:
        try:
            own = _local.own
        except AttributeError:  # (this thread's first call)
            own = None
        if own is None or own.loop.is_closed():
            own = _local.own = _Own(asyncio.new_event_loop())
        return _run_eager(own, coro) if task else _run_taskless(own, coro)
    return shared_loop().run(coro)


class _Own:
    """A thread's own event loop, with what a step run outside ``run_forever`` reads of it
    (kept: each read of a hook makes a bound method)."""

    __slots__ = ("hooks", "loop", "ready")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.hooks = (loop._asyncgen_firstiter_hook, loop._asyncgen_finalizer_hook)  # type: ignore[attr-defined]
        """Its async generator hooks, as ``run_forever`` sets them."""
        self.ready: deque[asyncio.Handle] | None = getattr(loop, "_ready", None)
        """BaseEventLoop's queue of callbacks ready to run (None for a loop without one)."""


def _run_taskless(own: _Own, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on this thread's loop (not running) without a task until it first waits;
    the rest of it, if any, in a task under the loop."""
    loop, ready = own.loop, own.ready
    context = contextvars.copy_context()  # what a task would run it in
    before = _as_running(loop, own.hooks)
    try:
        waits_on = context.run(coro.send, None)
    except StopIteration as done:
        if ready is None or ready:
            _drain(loop)
        return done.value
    except (Exception, asyncio.CancelledError):  # (KeyboardInterrupt, SystemExit: at once, as a task)
        if ready is None or ready:
            _drain(loop)
        raise
    finally:
        _not_running(before)
    return loop.run_until_complete(loop.create_task(_resumed(coro, waits_on), context=context))


def _as_running(loop: asyncio.AbstractEventLoop, hooks: tuple[Any, Any]) -> Any:
    """Make ``loop`` this thread's running loop, with its async generator ``hooks``
    (as ``run_forever`` sets them: async generators finalised on this loop),
    for a step run outside ``run_forever``; the hooks that were set, for :func:`_not_running`."""
    before = sys.get_asyncgen_hooks()
    asyncio.events._set_running_loop(loop)
    sys.set_asyncgen_hooks(*hooks)  # (by position: keywords cost the call twice as much)
    return before


def _not_running(hooks: Any) -> None:
    """Undo :func:`_as_running`: no running loop, the earlier hooks back."""
    asyncio.events._set_running_loop(None)
    sys.set_asyncgen_hooks(*hooks)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """One turn of ``loop`` when something is ready on it (a callback the coroutine scheduled,
    another thread's post), as ``run_until_complete`` of a finished task would take."""
    asyncio.events._set_running_loop(None)  # (run_until_complete sets it again)
    done = loop.create_future()
    done.set_result(None)
    loop.run_until_complete(done)


async def _resumed(coro: Coroutine[Any, Any, T], waits_on: Any) -> T:
    """``coro``, already started and waiting on ``waits_on``, run on by the task awaiting this."""
    return await _Resume(coro, waits_on)


class _Resume:
    """An awaitable that hands its task what a started coroutine is waiting on, then passes the
    task's sends and throws (a wake-up, a cancellation) into it until it ends (``yield from``
    for a coroutine whose first yield was already taken)."""

    __slots__ = ("coro", "waits_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waits_on: Any):
        self.coro = coro
        self.waits_on = waits_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waits_on = self.coro, self.waits_on
        while True:
            try:
                sent = yield waits_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown by the task (a cancellation): the coroutine's
                thrown: BaseException | None = exc
            else:
                thrown = None
            try:
                waits_on = coro.send(sent) if thrown is None else coro.throw(thrown)
            except StopIteration as done:
                return done.value


def _run_eager(own: _Own, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` as a task of this thread's loop (not running), its first step at once; the
    loop runs only if the coroutine waits or leaves callbacks to run."""
    # BaseEventLoop's queue of callbacks ready to run (another loop, uvloop's, has none: it
    # runs the task as ever)
    loop, ready = own.loop, own.ready
    task = loop.create_task(coro)
    # The task scheduled its first step with call_soon: the last handle of the queue, unless
    # another thread's call_soon_threadsafe came in between (then the loop runs it, as ever).
    handle = ready[-1] if ready else None
    if (
        ready is None
        or handle is None
        or getattr(getattr(handle, "_callback", None), "__self__", None) is not task
    ):
        return loop.run_until_complete(task)
    ready.remove(handle)  # by identity; atomic against other threads' appends
    before = _as_running(loop, own.hooks)
    try:
        handle._run()  # Task.__step: enters the task, sends into the coroutine, leaves it
    finally:
        _not_running(before)
    if task.done() and not ready:
        return task.result()  # the value, or the coroutine's exception with its own type
    # It waits for something (or left callbacks, such as a finished future's, to run): the
    # same task goes on under the loop.
    return loop.run_until_complete(task)
