"""A server's container pool: how many session containers it runs, who gets the next place, and
how many ready ones it keeps warm.

* **Places.** ``size`` (``serve --max-containers``) bounds the containers of the sessions this
  process admitted plus its warm ones. A session takes a place when it is created and gives it
  back when its container is removed (delete, expiry, or a shared store's reaper finding its
  session gone). Places are :class:`~._slots.Slots`: a client that asks while every place is
  taken waits in its own queue, and clients take turns, so one trainer opening 64 sessions at
  once does not starve another's single session. A wait is bounded (``wait`` seconds): past it
  the server answers 503 with Retry-After instead of queueing without end (back-pressure).
* **Warm containers.** Each environment's :class:`~._containers.SessionContainers` keeps up to
  ``warm`` containers ready ahead of need, keyed by image and tree (:mod:`._warm`: which tasks,
  from the clients' recent asks), refilled in the background while places are free. A session
  takes one made for its task by name when it is admitted (nothing left to do on its path), and
  it is never handed to a second session: the session's end removes it. A session that finds
  no warm one while warm ones of *another* key hold the last places evicts one of them, so warm
  containers never make the pool pass ``size``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable
from typing import Any, Protocol

from envbuilder.isolation.sandbox._slots import Slots

DEFAULT_WAIT = 10.0
"""Seconds a new session waits for a place before it is refused (503 with Retry-After)."""
RETRY_AFTER = 5
"""Seconds a refused client is asked to wait before it tries again."""


class WarmOwner(Protocol):
    """Who keeps a warm container (an environment's :class:`SessionContainers`)."""

    def drop_warm(self, name: str) -> None:
        """Remove the warm container ``name`` (the pool needs its place)."""


class ContainerPool:
    """The places (``size``, None: no bound) and warm containers of one server process."""

    def __init__(self, size: int | None = None, *, warm: int = 0, wait: float = DEFAULT_WAIT):
        if size is not None and size < 1:
            raise ValueError("a container pool needs at least one place")
        if warm < 0:
            raise ValueError("the number of warm containers cannot be negative")
        self.size = size
        self.warm = warm if size is None else min(warm, size)
        """Warm containers each environment keeps ready (fewer while places are short)."""
        self.wait = wait
        self._slots = Slots(size) if size is not None else None
        self._held: dict[str, float] = {}  # container name -> when its session was admitted
        self._warm: dict[str, WarmOwner] = {}
        self._filling = 0
        self.refused = 0
        """Sessions refused because no place came free in time."""

    # -- places ------------------------------------------------------------------------------

    async def admit(self, client: Hashable) -> bool:
        """Take a place for a new session of ``client`` (waiting, in turn with other clients,
        up to :attr:`wait` seconds); False when none came free."""
        if self._slots is None:
            return True
        try:
            await asyncio.wait_for(self._slots.acquire(client), self.wait)
        except TimeoutError:
            self.refused += 1
            return False
        return True

    def hold(self, name: str) -> None:
        """The place just admitted is held by the container ``name`` (until :meth:`release`)."""
        self._held[name] = time.monotonic()

    def cancel(self) -> None:
        """Give back a place admitted but never held (the session was not made)."""
        if self._slots is not None:
            self._slots.release()

    def release(self, name: str) -> bool:
        """Give back the place of container ``name`` (if it holds one); whether it did."""
        if self._held.pop(name, None) is None:
            return False
        if self._slots is not None:
            self._slots.release()
        return True

    def holds(self, name: str) -> bool:
        return name in self._held

    def held(self, older_than: float = 0.0) -> list[str]:
        """The names holding places, admitted at least ``older_than`` seconds ago."""
        now = time.monotonic()
        return [name for name, since in self._held.items() if now - since >= older_than]

    @property
    def in_use(self) -> int:
        return len(self._held)

    @property
    def waiting(self) -> int:
        return self._slots.waiting if self._slots is not None else 0

    # -- warm containers ---------------------------------------------------------------------

    def room(self) -> bool:
        """Whether one more warm container fits beside the sessions' and the warm ones."""
        taken = self.in_use + len(self._warm) + self._filling
        return self.size is None or taken < self.size

    def filling(self, delta: int) -> None:
        """A warm container is being made (+1), or that ended (-1)."""
        self._filling += delta

    def add_warm(self, name: str, owner: WarmOwner) -> None:
        self._warm[name] = owner

    def take_warm(self, name: str) -> None:
        """The warm container ``name`` goes to a session (or away): it is no longer warm."""
        self._warm.pop(name, None)

    def make_room(self) -> None:
        """When sessions and warm containers pass :attr:`size`, evict a warm container."""
        if self.size is not None and self.in_use + len(self._warm) > self.size and self._warm:
            name, owner = next(iter(self._warm.items()))
            self._warm.pop(name)
            owner.drop_warm(name)

    @property
    def warm_ready(self) -> int:
        return len(self._warm)

    def report(self) -> dict[str, Any]:
        """``/health``'s ``container_pool``: places, in use, warm, waiting and refused."""
        return {
            "max": self.size,
            "in_use": self.in_use,
            "warm": len(self._warm),
            "warm_target": self.warm,
            "waiting": self.waiting,
            "refused": self.refused,
        }
