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
    """``permits`` callers inside at once; the others wait their turn in arrival order."""

    def __init__(self, permits: int):
        if permits < 1:
            raise ValueError(f"max_callers must be at least 1, not {permits}")
        self.permits = permits
        self._mutex = threading.Lock()
        self._free = permits
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._closed = False

    @property
    def inside(self) -> int:
        """Callers holding a permit now."""
        return self.permits - self._free

    @property
    def waiting(self) -> int:
        """Callers waiting for a permit now."""
        return len(self._waiters)

    def enter(self) -> None:
        """Take a permit, waiting for one if none is free; ``ClientError`` once closed."""
        with self._mutex:
            if self._closed:
                raise ClientError(CLOSED)
            if self._free:  # a free permit means nobody waits: a release hands it on first
                self._free -= 1
                return
            waiter = _Waiter()
            self._waiters.append(waiter)
        try:
            waiter.lock.acquire()  # asleep in the kernel: no interpreter lock asked for
        except BaseException:  # KeyboardInterrupt in the main thread while it waited
            with self._mutex:
                if waiter.granted:  # its turn came as it left: the next one's now
                    self._hand_on()
                elif not self._closed:
                    self._waiters.remove(waiter)  # O(waiters), on this rare path only
            raise
        if not waiter.granted:
            raise ClientError(CLOSED)

    def leave(self) -> None:
        """Give the permit back: to the first waiter, else to the free ones."""
        with self._mutex:
            self._hand_on()

    def _hand_on(self) -> None:
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.granted = True
            waiter.lock.release()
        else:
            self._free += 1

    def close(self) -> None:
        """Refuse new callers and wake every waiter to fail (callers inside finish as they do)."""
        with self._mutex:
            self._closed = True
            waiters, self._waiters = self._waiters, collections.deque()
        for waiter in waiters:
            waiter.lock.release()
