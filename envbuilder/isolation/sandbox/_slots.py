"""How many sandboxed runs go at once, and who goes next: a fair queue of run slots.

Runs are CPU-bound, so more of them at once than there are cores only makes each slower.
One process-wide :class:`Slots` (size ``$ENVBUILDER_SANDBOX_CONCURRENCY``, default the cores
this process may use) bounds every grader and tool together. Waiters queue per key (a
session, say) and keys take turns: one session sending 32 answers at once does not make
another session's single answer wait for all 32. Without a key, waiters share one FIFO
queue. It is thread-safe and works across event loops (tests and tools may run several):
a slot is handed to a waiter on the waiter's own loop, or to a thread that waits in
:meth:`Slots.hold`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable, Iterator

CONCURRENCY_ENV = "ENVBUILDER_SANDBOX_CONCURRENCY"

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"] | threading.Event


def default_concurrency() -> int:
    """``$ENVBUILDER_SANDBOX_CONCURRENCY``, else the number of cores this process may use."""
    return count_setting(CONCURRENCY_ENV)


def count_setting(name: str, at_least: int = 1) -> int:
    """``$name`` (a whole number ≥ 1), else the number of cores this process may use (at least
    ``at_least``). Raises ValueError naming the variable when it is not such a number."""
    configured = os.environ.get(name)
    if configured:
        try:
            value = int(configured)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{name} must be a whole number ≥ 1 (got {configured!r})")
        return value
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(at_least, cores)


class Slots:
    """At most ``size`` holders at once; waiters served round-robin by key, FIFO within a key."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError("a slot pool needs at least one slot")
        self.size = size
        self._lock = threading.Lock()
        self._free = size
        self._queues: OrderedDict[Hashable, deque[_Waiter]] = OrderedDict()

    @property
    def in_use(self) -> int:
        return self.size - self._free

    @property
    def waiting(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    @contextlib.asynccontextmanager
    async def slot(self, key: Hashable = None) -> AsyncIterator[None]:
        """Hold one slot for the block (waiting for one, fairly, when all are taken)."""
        await self._acquire(key)
        try:
            yield
        finally:
            self._release()

    async def acquire(self, key: Hashable = None) -> None:
        """Take one slot for a holder that outlives a block (a session's container): wait for
        it fairly, as :meth:`slot` does; give it back with :meth:`release`."""
        await self._acquire(key)

    def release(self) -> None:
        """Give back a slot taken with :meth:`acquire` (to the next waiter in turn)."""
        self._release()

    @contextlib.contextmanager
    def hold(self, key: Hashable = None) -> Iterator[None]:
        """:meth:`slot` for a thread that may block: waits in this thread, in the same queues."""
        with self._lock:
            if self._free and not self._queues:
                self._free -= 1
                event = None
            else:
                event = threading.Event()
                self._queues.setdefault(key, deque()).append(event)
        if event is not None:
            event.wait()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, key: Hashable) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free and not self._queues:
                self._free -= 1
                return
            fut: asyncio.Future[None] = loop.create_future()
            waiter: _Waiter = (loop, fut)
            self._queues.setdefault(key, deque()).append(waiter)
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                queue = self._queues.get(key)
                if queue is not None and waiter in queue:
                    queue.remove(waiter)
                    if not queue:
                        del self._queues[key]
                    raise
            # The slot was already handed to us: pass it on.
            if fut.done() and not fut.cancelled():
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            while self._queues:
                key, queue = next(iter(self._queues.items()))
                waiter = queue.popleft()
                if queue:
                    self._queues.move_to_end(key)  # the next key's turn
                else:
                    del self._queues[key]
                if isinstance(waiter, threading.Event):
                    waiter.set()
                    return
                loop, fut = waiter
                try:
                    loop.call_soon_threadsafe(self._hand_over, fut)
                except RuntimeError:  # that loop is closed: its waiter is gone
                    continue
                return
            self._free += 1

    def _hand_over(self, fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            self._release()
        else:
            fut.set_result(None)


_shared: Slots | None = None
_shared_lock = threading.Lock()


def shared_slots() -> Slots:
    """The process-wide slot pool every sandboxed run goes through."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Slots(default_concurrency())
        return _shared
