"""``--max-containers`` across workers and replicas: the places counted in the shared store.

With the memory store a server is one process (``--workers`` above 1 needs a shared store), so
its :class:`~envbuilder.isolation.sandbox.ContainerPool` is the whole bound. With ``--store
redis://`` every worker of every replica has its own pool (its clients' turns), and the bound
must hold over all of them: :class:`SharedPlaces` keeps one place per container in the store, a
sorted set ``eb:places`` of container name → the lease's expiry (the store's clock).

* **Taking** a place is one script: expired leases are dropped, and a new one is added only
  while fewer than ``size`` remain. A session that finds none waits (polling, up to the pool's
  wait) and is then refused with 503, like a full local pool.
* **Leases expire.** A place lasts ``lease`` seconds unless renewed; each server's sweep renews
  the places of the containers it holds and of every container bound to a live session
  (whichever replica made it: a session outlives the server that made its container). So a
  server killed between admitting a session and binding its container loses those places
  after one lease, and the places of its sessions come back when the sessions end (deleted
  through another replica, or expired and reaped).
* **Giving back** happens wherever a container is removed: the session's end, the pool
  evicting a warm container, the reaper.

The bound is on places, and a container exists only once it has one, except in two cases: a
warm container is made before it takes its place (it is removed at once when none is free);
and a place whose lease ended while its container lived (every replica down, or stalled, for
longer than a lease) is not taken again, so until that session ends one more container may
be admitted than the bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from envbuilder.errors import RequestRejected
from envbuilder.isolation.sandbox import ContainerPool
from envbuilder.isolation.sandbox._pool import WarmOwner
from envbuilder.server._redis import PREFIX, RedisStore

__all__ = ["PLACES", "SharedPlaces", "SharedPool"]

log = logging.getLogger("envbuilder.server")

PLACES = PREFIX + "places"
"""Sorted set: container name → when its place's lease ends (ms, the store's clock)."""

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: places. ARGV: name, size, lease (ms). 1: the place is the name's; 0: none is free.
_TAKE = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
"""
)

# KEYS: places. ARGV: lease (ms), names... The places in use after the renewal. Only a place
# still held is renewed (XX): one given back while the sweep ran is not taken again.
_RENEW = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
return redis.call('ZCARD', KEYS[1])
"""
)

POLL = 0.1
"""Seconds between a waiting session's tries for a shared place (doubled up to 1 s)."""


class SharedPlaces:
    """The ``size`` places of every server on one store (see the module docstring)."""

    def __init__(self, store: RedisStore, size: int, lease: float):
        self.store = store
        self.size = size
        self.lease_ms = int(lease * 1000)
        self.in_use = 0
        """The places in use at the last take or renewal (for ``/health``)."""

    async def take(self, name: str) -> bool:
        """A place for container ``name`` now (its own if it has one); False when none is free.

        Raises:
            RequestRejected: the store is unavailable (503).
        """
        taken = await self.store._eval(_TAKE, [PLACES], [name, self.size, self.lease_ms])
        return bool(taken)

    async def wait(self, name: str, seconds: float) -> bool:
        """:meth:`take`, tried again until ``seconds`` pass; whether it got a place."""
        deadline = time.monotonic() + seconds
        pause = POLL
        while True:
            if await self.take(name):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)

    async def renew(self, names: Iterable[str]) -> int:
        """Renew the places of ``names`` that still hold one; the places in use."""
        self.in_use = int(await self.store._eval(_RENEW, [PLACES], [self.lease_ms, *sorted(set(names))]))
        return self.in_use

    async def give(self, names: Iterable[str]) -> None:
        """Give back the places of ``names`` (a name without one is fine)."""
        names = list(names)
        if names:
            await self.store._do(b"ZREM", PLACES, *names)


class SharedPool(ContainerPool):
    """A server process's pool whose places are also :class:`SharedPlaces`: a place given back
    here is given back in the store, and a warm container keeps one too."""

    def __init__(self, places: SharedPlaces, *, warm: int, wait: float):
        super().__init__(places.size, warm=warm, wait=wait)
        self.places = places
        self._warm_names: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()

    def leased(self) -> set[str]:
        """The names whose places this process renews: its sessions' and its warm containers'."""
        return set(self.held()) | self._warm_names

    def release(self, name: str) -> bool:
        self._warm_names.discard(name)
        self._spawn(self._give(name))
        return super().release(name)

    def add_warm(self, name: str, owner: WarmOwner) -> None:
        super().add_warm(name, owner)
        self._warm_names.add(name)
        self._spawn(self._lease_warm(name, owner))

    def take_warm(self, name: str) -> None:
        super().take_warm(name)
        self._warm_names.discard(name)  # (a session holds it now: held() renews it)

    async def _lease_warm(self, name: str, owner: WarmOwner) -> None:
        try:
            if await self.places.take(name):
                return
        except RequestRejected as exc:
            log.warning("no shared place for the warm container %s: %s", name, exc.message)
        if name in self._warm_names:  # no place anywhere: it goes (a session may hold it by now)
            super().take_warm(name)
            self._warm_names.discard(name)
            owner.drop_warm(name)

    async def _give(self, name: str) -> None:
        try:
            await self.places.give([name])
        except RequestRejected as exc:  # its lease ends by itself
            log.warning("could not give back the place of %s: %s", name, exc.message)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def report(self) -> dict[str, Any]:
        return {**super().report(), "shared": True, "shared_in_use": self.places.in_use}
