"""Session containers on a server: a place in the pool for each new session, warm containers
kept ready, and, with a shared store, the reaper that removes the containers of sessions that
no longer exist, whichever replica made them.

**Places and back-pressure.** ``/create`` on an environment with a `sandbox:` takes a place in
the server's :class:`~envbuilder.isolation.sandbox.ContainerPool` (``--max-containers``; clients take
turns) and names the session's container, a warm one when one is ready. No place within the
pool's wait: 503 with Retry-After and a JSON ``detail``, never a container more than the bound.

**Places across replicas.** With a shared store the bound holds over every worker and replica
(:mod:`envbuilder.server._places`): a session takes this process's place (its clients' turns),
then a place in the store for its container's name, leased and renewed by the sweep below.
With the memory store a server is one process, and its pool is the whole bound.

**Reaping with a shared store** (``--store redis://``). A session there outlives the process
that made its container (any replica serves it; a killed server's sessions go on), so a start
does not reap by server id. Instead each container is bound to its session in the store
(``eb:boxes``: container name → session key, written before the session exists, so a
container is never made unbound) and labelled with the store's id (``eb:store``, the same for
every replica). Every ``reap_interval`` each server:

* removes the bound containers whose session is gone (deleted elsewhere, or expired: the
  store's TTL is the session timeout), and unbinds them;
* removes the unbound containers (warm ones, and grading ones) whose maker is dead: every
  process renews ``eb:alive:<owner>`` while it runs;
* gives back the places it holds for sessions that no longer exist.

Every step is idempotent, so replicas may race on it: removing a container that is gone is not
an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, RequestRejected
from envbuilder.isolation.sandbox import ContainerPool, SessionContainers
from envbuilder.isolation.sandbox._docker import OWNER_LABEL, owner
from envbuilder.isolation.sandbox._pool import RETRY_AFTER
from envbuilder.server._places import SharedPlaces, SharedPool
from envbuilder.server._redis import PREFIX, RedisStore
from envbuilder.server._sessions import Sessions

log = logging.getLogger("envbuilder.server")

BOXES = PREFIX + "boxes"
"""Hash: container name → the key of the session it belongs to."""
STORE_ID = PREFIX + "store"
ALIVE = PREFIX + "alive:"
STORE_LABEL = "envbuilder.store"
"""The label of every container a server on a shared store makes: the store's id."""
UNBOUND_GRACE = 30.0
"""Seconds a place may stay held for a container the store does not know (its session being
made) before it is given back."""


class ContainerKeeper:
    """The pool and the reaper of one server's session containers."""

    def __init__(
        self,
        envs: Iterable[Environment],
        sessions: Sessions,
        *,
        size: int | None,
        warm: int,
        wait: float,
        interval: float,
    ):
        self.containers = [e.containers for e in envs if e.containers is not None]
        self.store = sessions if isinstance(sessions, RedisStore) else None
        self.interval = interval
        self.places: SharedPlaces | None = None
        """With a shared store and a bound: the places of every worker and replica."""
        if self.store is not None and size is not None:
            self.places = SharedPlaces(self.store, size, lease=self._alive_ms / 1000)
            self.pool: ContainerPool = SharedPool(self.places, warm=warm, wait=wait)
        else:
            self.pool = ContainerPool(size, warm=warm, wait=wait)
        self.store_id: str | None = None
        for containers in self.containers:
            containers.pool = self.pool
            if self.store is not None:
                containers.reap_by_server = False  # the store's reaper decides (see above)
        self._tasks: set[asyncio.Task[None]] = set()

    # -- /create -----------------------------------------------------------------------------

    async def admit(self, env: Environment, client: str, task: Mapping[str, Any] | None = None) -> str:
        """A place for a new session of ``client`` on ``env`` (for ``task``) and its container's
        name: a warm container made for the task's image and tree when one is ready.

        Raises:
            RequestRejected: 503 with Retry-After when no place came free in time.
        """
        containers = env.containers
        assert containers is not None
        started = time.monotonic()
        name = await containers.admit(client, task)
        if name is not None and self.places is not None:
            try:
                shared = await self.places.wait(name, max(self.pool.wait - (time.monotonic() - started), 0))
            except BaseException:
                self.forget(env, name)
                raise
            if not shared:  # every worker's and replica's places are taken
                self.pool.refused += 1
                self.forget(env, name)
                name = None
        if name is None:
            pool = self.pool
            raise RequestRejected(
                503,
                f"the server runs its maximum of {pool.size:,} session containers and none came "
                f"free within {pool.wait:g} s; retry shortly",
                headers={"Retry-After": str(RETRY_AFTER)},
            )
        return name

    async def bind(self, name: str, key: str) -> None:
        """Record in a shared store that container ``name`` belongs to the session ``key``."""
        if self.store is not None:
            await self.store._do(b"HSET", BOXES, name, key)

    def forget(self, env: Environment, name: str) -> None:
        """A session admitted but not made: its container (a warm one) goes, its place too."""
        assert env.containers is not None
        self._spawn(self._drop(env.containers, name))

    async def _drop(self, containers: SessionContainers, name: str) -> None:
        try:
            await containers.remove(name)
            if self.store is not None:
                await self.store._do(b"HDEL", BOXES, name)
        except (EnvbuilderError, RequestRejected) as exc:
            log.warning("could not remove the container %s: %s", name, exc)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep warm containers filled and, with a shared store, reap (until cancelled)."""
        while True:
            for containers in self.containers:
                containers.start_warming()
            if self.store is not None:
                try:
                    await self.sweep()
                except (EnvbuilderError, RequestRejected) as exc:
                    log.warning("could not reap session containers: %s", exc)
            await asyncio.sleep(self.interval)

    async def _id(self, store: RedisStore) -> str:
        """The store's id (made by the first server that asks; the same for every replica)."""
        if self.store_id is None:
            await store._do(b"SET", STORE_ID, secrets.token_hex(8), b"NX")
            raw = await store._do(b"GET", STORE_ID)
            self.store_id = raw.decode()
            for containers in self.containers:
                containers.extra_labels[STORE_LABEL] = self.store_id
        return self.store_id

    async def prepare(self) -> None:
        """Before serving: the store's id, so every container is made with it (a store that
        does not answer yet is asked again by :meth:`run`)."""
        if self.store is not None:
            with contextlib.suppress(RequestRejected):
                await asyncio.wait_for(self._id(self.store), 5)
                await self.store._do(b"SET", ALIVE + owner(), b"1", b"PX", self._alive_ms)

    @property
    def _alive_ms(self) -> int:
        return int(max(self.interval, 1.0) * 3000)

    async def sweep(self) -> int:
        """One round of the shared store's reaper (see the module's docstring); the number of
        containers removed."""
        store = self.store
        assert store is not None
        store_id = await self._id(store)
        await store._do(b"SET", ALIVE + owner(), b"1", b"PX", self._alive_ms)
        engines = {str(c.address): c for c in self.containers}
        listed: list[tuple[SessionContainers, dict[str, Any]]] = []
        for containers in engines.values():
            async with containers.engine.connect() as api:
                found = await api.containers({STORE_LABEL: store_id})
            listed += [(containers, c) for c in found]
        flat = await store._do(b"HGETALL", BOXES)  # after the listing: a listed container is bound
        boxes = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        keys = sorted(set(boxes.values()))
        exists = await asyncio.gather(*(store._do(b"EXISTS", PREFIX + "s:" + k) for k in keys))
        live = {k for k, n in zip(keys, exists, strict=True) if n}
        gone = [name for name, key in boxes.items() if key not in live]
        removed = 0
        for name in gone:
            for containers in engines.values():
                await containers.remove(name)  # (its place too, if this server holds it)
            removed += 1
        if gone:
            await store._do(b"HDEL", BOXES, *gone)
        makers = {_labels(c).get(OWNER_LABEL, "") for _, c in listed if _name(c) not in boxes}
        makers.discard(owner())
        alive = dict(
            zip(makers, await asyncio.gather(*(store._do(b"EXISTS", ALIVE + m) for m in makers)), strict=True)
        )
        for containers, container in listed:
            name = _name(container)
            maker = _labels(container).get(OWNER_LABEL, "")
            if name in boxes or maker == owner():
                continue
            if not alive.get(maker):
                await containers.remove(name)
                removed += 1
        for name in self.pool.held(older_than=UNBOUND_GRACE):
            if name not in boxes:
                self.pool.release(name)  # its session was deleted and unbound by another server
        if self.places is not None and isinstance(self.pool, SharedPool):
            kept = {name for name, key in boxes.items() if key in live} | self.pool.leased()
            await self.places.renew(kept)  # (a place of a container removed above was given back)
        if removed:
            log.info("removed %d session container(s) whose session or maker is gone", removed)
        return removed

    async def aclose(self) -> None:
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task

    def report(self) -> dict[str, Any]:
        return self.pool.report()


def _labels(container: dict[str, Any]) -> dict[str, str]:
    return dict(container.get("Labels") or {})


def _name(container: dict[str, Any]) -> str:
    names = container.get("Names") or [""]
    return str(names[0]).lstrip("/")
