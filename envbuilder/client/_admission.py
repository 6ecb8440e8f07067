"""The sync client's admission: at most K caller threads inside a call at once, the rest asleep
in arrival order.

Why: :class:`~envbuilder.client.Client` runs every call on its loop thread while the caller's
thread waits, and its pool serves ``max_connections`` requests at a time. Thousands of caller
threads inside calls at once gain nothing from that (their requests wait in the pool's queue)
but cost the interpreter lock: each thread that is ready to run and waiting for the lock wakes
every switch interval (5 ms) to ask for it, so N threads ready together cost O(N) per thread,
and the loop thread that serves them all waits its turn among them. Here a caller past the
K-th waits in the kernel on a lock of its own (as ``threading.Condition``'s waiters do), so it
never asks for the interpreter lock while it waits; each call that ends hands its permit to
exactly one waiter, the one that came first.

A waiter waits without a deadline, as a request waits for a pool connection (the client's
``timeout`` counts from the moment a request has its connection); :meth:`Admission.close`
wakes every waiter, and each fails with the client's error.
"""

from __future__ import annotations

import collections
import threading

from envbuilder.client import _futex
from envbuilder.client._errors import ClientError

__all__ = ["Admission", "default_permits"]

#: What a call on a closed client raises (and a caller still waiting when it closed).
CLOSED = "the client is closed (Client.close() was called): make calls before closing it"


def default_permits(max_connections: int) -> int:
    """``max_connections`` and a tenth more (at least one): when a connection frees, the next
    request is already waiting in the pool for it, not a thread hop away."""
    return max_connections + max(1, max_connections // 10)


class _Waiter:
    """One caller waiting: a lock held until its turn (or the close) releases it."""

    __slots__ = ("granted", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.granted = False


class Admission:
    """``permits`` callers inside at once; the others wait their turn in arrival order.

    No mutex: the free permits (one item each) and the waiters are deques, whose appends and
    pops are atomic under the interpreter lock. A first version with one mutex cost twice
    main's CPU at 4,096 threads (126 context switches per call against 11, one run), likely a
    convoy: a thread made to give up the interpreter lock while holding the mutex sends every
    thread that runs after it to sleep on the mutex and queue for the interpreter lock again
    (``bench/README.md``, clients.py, fourth round). Each side publishes first and looks
    second (a caller queues, then looks for a free permit; a leaver frees its permit, then looks
    for a waiter), so a permit and a waiter never miss each other; whichever side takes the
    item first wins, the other sees the deque empty and goes on.
    """

    def __init__(self, permits: int):
        if permits < 1:
            raise ValueError(f"max_callers must be at least 1, not {permits}")
        self.permits = permits
        self._free: collections.deque[None] = collections.deque([None] * permits)
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._closed = False

    @property
    def inside(self) -> int:
        """Callers holding a permit now."""
        return self.permits - len(self._free)

    @property
    def waiting(self) -> int:
        """Callers waiting for a permit now."""
        return len(self._waiters)

    def enter(self) -> None:
        """Take a permit, waiting for one if none is free; ``ClientError`` once closed."""
        if self._closed:
            raise ClientError(CLOSED)
        if self._take():
            return
        waiter = _Waiter()
        self._waiters.append(waiter)
        # A permit freed, or a close, between the look above and the append: it did not see
        # this waiter, so the waiter takes the permit (or fails) itself, if still queued.
        while self._free or self._closed:
            if not self._withdraw(waiter):
                break  # a leaver (or the close) has it: its lock is being released
            if self._closed:
                raise ClientError(CLOSED)
            if self._take():
                return
            self._waiters.append(waiter)  # another caller took that permit: queue again
        try:
            # A crowd waits: each sleeper is a futex, and the kernel's table of them may be too
            # small for the process's threads (``_futex``: a look, no lock; a resize once per
            # doubling of the callers this admission holds).
            _futex.fit(len(self._waiters) + self.permits)
            waiter.lock.acquire()  # asleep in the kernel: no interpreter lock asked for
        except BaseException:  # KeyboardInterrupt in the main thread while it waited
            if not self._withdraw(waiter):
                waiter.lock.acquire()  # popped by a leaver or the close: wait for its release
                if waiter.granted:
                    self.leave()  # its turn came as it left: the next one's now
            raise
        if not waiter.granted:
            raise ClientError(CLOSED)

    def leave(self) -> None:
        """Give the permit back: to the first waiter, else to the free ones."""
        while True:
            try:
                waiter = self._waiters.popleft()
            except IndexError:
                self._free.append(None)
                # A caller queued between the pop and this append looks for a free permit
                # after queuing; one that looked before the append is still queued: hand it on.
                if not self._waiters or not self._take():
                    return
                continue
            waiter.granted = True
            waiter.lock.release()
            return

    def close(self) -> None:
        """Refuse new callers and wake every waiter to fail (callers inside finish as they do)."""
        self._closed = True
        while True:
            try:
                waiter = self._waiters.popleft()
            except IndexError:
                return
            waiter.lock.release()  # not granted: it raises

    def _take(self) -> bool:
        try:
            self._free.pop()
        except IndexError:
            return False
        return True

    def _withdraw(self, waiter: _Waiter) -> bool:
        """Take ``waiter`` out of the queue; False if a leaver or the close popped it first."""
        try:
            self._waiters.remove(waiter)  # O(waiters): only when a permit or a close crossed it
        except ValueError:
            return False
        return True
