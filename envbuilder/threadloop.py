"""An event loop in a thread: how synchronous code runs envbuilder's async code.

:class:`LoopThread` is one event loop running forever in a daemon thread; any thread hands it a
coroutine and waits for (or is given a future of) the result. The synchronous ORS client keeps
one per client (its session pings run there while the caller's thread is busy); the in-process
episodes of the trainers' adapters share one for callers that are inside a running loop already.
:func:`run_sync` is the entry point of synchronous code: a thread with no running loop runs the
coroutine on an event loop kept for that thread (no thread hop on the hot path, and connections
opened by a judge stay on the loop that opened them); a thread inside a running loop hands it to
the shared :class:`LoopThread`, so no loop is ever nested.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from synchronous code: on this thread's own loop, or on the
    shared loop when this thread is already running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = getattr(_local, "loop", None)
        if loop is None or loop.is_closed():
            loop = _local.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)
    return shared_loop().run(coro)
