"""Time budgets for work a spec or an answer controls, and worker threads that keep the loop free.

A Jinja render or a grading step runs Python code chosen by a spec author (templates) or by
an agent (answers). A thread cannot be killed from outside, but Python code can be stopped
inside its own thread: :func:`deadline` registers the running thread with one watchdog thread,
which raises :class:`Overrun` in it (``PyThreadState_SetAsyncExc``) when the budget is spent.
That reaches the next bytecode the thread runs, so a template loop stops within milliseconds;
a single long C call is not interrupted, which is why the template sandbox also bounds the size
of everything it builds (``templating/_sandbox.py``).

Slow work runs on :func:`offload`'s daemon threads: the event loop keeps answering, and a
stuck worker never holds the interpreter's exit (SIGTERM still stops the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import heapq
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

__all__ = ["Overrun", "current_party", "deadline", "offload", "party"]

T = TypeVar("T")


class Overrun(BaseException):
    """Raised inside a thread whose :func:`deadline` passed. A BaseException so that code under
    the budget (a template's ``except Exception``) cannot swallow it."""


class _Watchdog:
    """One daemon thread that raises :class:`Overrun` in threads past their deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, int]] = []
        self._live: dict[int, int] = {}  # token -> thread id, while the block runs
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def enter(self, seconds: float) -> int:
        token = next(self._tokens)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="envbuilder-watchdog", daemon=True)
                self._thread.start()
            self._live[token] = threading.get_ident()
            heapq.heappush(self._heap, (time.monotonic() + seconds, token, threading.get_ident()))
            self._wake.notify()
        return token

    def leave(self, token: int) -> bool:
        """Unregister; True when the watchdog fired for this block (its exception is cleared
        here if it has not been raised yet, so it cannot escape into unrelated code)."""
        with self._lock:
            self._live.pop(token, None)
            fired = token in self._fired
            if fired:
                self._fired.discard(token)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), None)
        return fired

    def _run(self) -> None:
        with self._lock:
            while True:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wake.wait()
                    continue
                when, token, ident = self._heap[0]
                left = when - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._heap)
                self._fired.add(token)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(Overrun))


_WATCHDOG = _Watchdog()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Stop the Python code of this block (in this thread) after ``seconds``: it raises
    :class:`Overrun`, which leaves the block as it is."""
    token = _WATCHDOG.enter(seconds)
    try:
        yield
    finally:
        # Whatever ends the block (its result, Overrun, any other error), the thread is
        # unregistered here, so the watchdog can never fire into the code that runs next.
        fired = _WATCHDOG.leave(token)
    if fired:
        raise Overrun


class _Workers:
    """Daemon worker threads fed by a queue (``concurrent.futures`` threads are joined at exit)."""

    def __init__(self, size: int):
        self._size = size
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any], fut: asyncio.Future[Any]) -> None:
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name="envbuilder-worker", daemon=True)
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1
        self._queue.put((fn, fut))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, fut = item
            loop = fut.get_loop()
            try:
                result = fn()
            except BaseException as exc:  # handed to the awaiting coroutine
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, fut, None, exc)
            else:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, fut, result, None)
            with self._lock:
                self._idle += 1


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(result)
    elif isinstance(exc, Overrun):
        fut.set_exception(TimeoutError("the work ran out of time"))
    else:
        fut.set_exception(exc)


_WORKERS = _Workers(min(32, (os.cpu_count() or 1) + 4))


async def offload(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on a daemon worker thread and await its result."""
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    context = contextvars.copy_context()  # the party and limits of the caller go with the work
    _WORKERS.submit(lambda: context.run(fn, *args), fut)
    return await fut


_party: contextvars.ContextVar[Hashable] = contextvars.ContextVar("envbuilder_party", default=None)


class party:  # lower case: used like the function it replaced, ``with party(key):``
    """Mark the work of this block (and the tasks it starts) as done for ``key`` (a session):
    shared queues (the grading processes, the sandbox's slots) serve parties in turn.

    A class rather than a generator-based context manager: it is entered on every tool call."""

    __slots__ = ("_key", "_token")

    def __init__(self, key: Hashable) -> None:
        self._key = key

    def __enter__(self) -> None:
        self._token = _party.set(self._key)

    def __exit__(self, *exc: object) -> None:
        _party.reset(self._token)


def current_party() -> Hashable:
    """Who the running work is for (see :func:`party`); None outside any party."""
    return _party.get()
