"""The shared session store on Redis (or Valkey): several workers and replicas serve one set of
sessions.

Keys (all under ``eb:``):

``s:<sid>``       ``b"<version>:" + JSON of Session.to_dict()``, expiring after the session
                  timeout; every read renews it (``GETEX``), so the TTL is the reaper.
``c:<task_id>``   the SSE frames of a finished call, for the re-attach window (``call_linger``).
``q:<task_id>``   a running call that a client may re-attach to: ``{"sid", "name", "input"}``,
                  deleted when its result is saved.
``l:<task_id>``   the lease of the worker running it, renewed while it runs. A worker that is
                  killed stops renewing; the next re-attach takes the lease and runs the call
                  again on the session as last saved, so the dead worker's attempt never counts.
``grades``        a hash outcome → count of the grades saved (each exactly once).

An episode update is one Lua script (:data:`_SAVE`): it compares the version the caller read,
and only then writes the session, the call's result and the grade count together. Two calls on
one session that read the same version cannot both be saved; the loser re-reads and re-runs
(``_ops.run_call``), and sees the answer the winner counted.

Round trips per GSM8K episode: ``create`` 1 (``SET NX``), ``prompt`` 1 (``GETEX``), ``call`` 2
(:data:`_BEGIN`: read, announce and lease; :data:`_SAVE`), ``delete`` 1; the connection (``_resp``) writes
the commands of concurrent requests together. Redis unreachable: every request that needs a
session answers 503 with ``Retry-After``; the next command reconnects.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from envbuilder.errors import RequestError
from envbuilder.server._resp import Address, Connection, StoreDown
from envbuilder.server._sessions import Session

PREFIX = "eb:"
LEASE_MS = 3000
"""A running call's lease; renewed every third of it, so a dead worker's call is free after ≤3 s."""
RETRY_AFTER = "1"


# KEYS: session, result, grades, running call. ARGV: version read, new record, session ttl ms,
# frames, linger ms, outcome ('' when nothing was graded). The running call's record goes with
# the save: from then on the result answers a re-attach, and the call is never run again.
_SAVE = """
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if string.match(cur, '^(%d+):') ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
redis.call('DEL', KEYS[4])
if ARGV[6] ~= '' then redis.call('HINCRBY', KEYS[3], ARGV[6], 1) end
return 1
"""


def _session(raw: bytes) -> Session:
    version, _, record = raw.partition(b":")
    return Session.from_dict(orjson.loads(record), int(version))


def _down() -> RequestError:
    return RequestError(
        503, "the session store is unavailable; retry shortly", headers={"Retry-After": RETRY_AFTER}
    )


# KEYS: session, running call, lease. ARGV: session ttl ms, request, its ttl ms, owner, lease ms.
# A new call in one round trip: read the session (renewing it), announce the call, take its lease.
_BEGIN = """
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
return cur
"""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call some worker started and a client re-attaches to."""

    sid: str
    name: str
    input: dict[str, Any]
    ours: bool
    """Whether this worker now holds the lease (its owner is gone): it must run the call."""


def check_url(url: str) -> str | None:
    """Why ``url`` is not a usable store URL (None when it is)."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return f"unsupported store {url!r}: expected memory or redis://host:port/db"
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return "the redis store needs hiredis: pip install 'envbuilder[redis]'"
    try:
        Address.parse(url)
    except ValueError as exc:
        return f"invalid store URL {url!r}: {exc}"
    return None


class RedisStore:
    """Sessions and call results in Redis, shared by every process that points at it."""

    shared = True

    def __init__(self, url: str, session_timeout: float, call_linger: float):
        self.url = url
        self._redis = Connection(url)
        self._ttl_ms = max(1, int(session_timeout * 1000))
        self._linger_ms = max(1, int(call_linger * 1000))
        self._owner = f"{os.uname().nodename}:{os.getpid()}".encode()

    async def _do(self, *command: Any) -> Any:
        try:
            return await self._redis.call(*command)
        except StoreDown:
            raise _down() from None

    # -- sessions ---------------------------------------------------------------------------------

    async def get(self, sid: str) -> Session | None:
        raw = await self._do(b"GETEX", PREFIX + "s:" + sid, b"PX", self._ttl_ms)
        return None if raw is None else _session(raw)

    async def begin(self, sid: str, task_id: str, name: str, tool_input: dict[str, Any]) -> Session | None:
        """The session of a new call, with the call announced and leased (:meth:`claim`)."""
        request = orjson.dumps({"sid": sid, "name": name, "input": tool_input})
        keys = [PREFIX + "s:" + sid, PREFIX + "q:" + task_id, PREFIX + "l:" + task_id]
        args: list[bytes | str | int] = [
            self._ttl_ms,
            request,
            self._linger_ms + LEASE_MS,
            self._owner,
            LEASE_MS,
        ]
        try:
            raw = await self._redis.eval(_BEGIN, keys, args)
        except StoreDown:
            raise _down() from None
        return None if raw is None else _session(raw)

    async def add(self, session: Session) -> bool:
        """Store a new session; True too for a retried create whose first try was saved but
        not answered (a worker killed meanwhile): the stored record is equal (untouched)."""
        # A random first version: a session deleted and created again under the same id while
        # a call on the old one runs cannot be overwritten by that call's save.
        version = secrets.randbits(48)
        record = session.to_json()
        key = PREFIX + "s:" + session.sid
        if await self._do(b"SET", key, b"%d:" % version + record, b"PX", self._ttl_ms, b"NX"):
            session.version = version
            return True
        stored = await self._do(b"GET", key)
        return stored is not None and stored.partition(b":")[2] == record

    async def latest(self, session: Session) -> Session | None:
        return session  # just read; ``save`` checks its version

    async def save(self, session: Session, task_id: str, frames: bytes, outcome: str | None) -> bool:
        new = b"%d:" % (session.version + 1) + session.to_json()
        keys = [
            PREFIX + "s:" + session.sid,
            PREFIX + "c:" + task_id,
            PREFIX + "grades",
            PREFIX + "q:" + task_id,
        ]
        args: list[bytes | str | int] = [
            session.version,
            new,
            self._ttl_ms,
            frames,
            self._linger_ms,
            outcome or "",
        ]
        try:
            done = await self._redis.eval(_SAVE, keys, args)
        except StoreDown:
            raise _down() from None
        if done == 1:
            session.version += 1
        return bool(done == 1)

    async def delete(self, sid: str) -> None:
        await self._do(b"DEL", PREFIX + "s:" + sid)

    # -- calls ------------------------------------------------------------------------------------

    async def record(self, task_id: str, frames: bytes) -> None:
        await asyncio.gather(
            self._do(b"SET", PREFIX + "c:" + task_id, frames, b"PX", self._linger_ms),
            self._do(b"DEL", PREFIX + "q:" + task_id),
        )

    async def result(self, task_id: str) -> bytes | None:
        frames: bytes | None = await self._do(b"GET", PREFIX + "c:" + task_id)
        return frames

    async def claim(self, task_id: str, sid: str, name: str, tool_input: dict[str, Any]) -> None:
        """Announce a running call (re-attachable from any worker) and take its lease."""
        request = orjson.dumps({"sid": sid, "name": name, "input": tool_input})
        await asyncio.gather(  # one write: the connection pipelines them
            self._do(b"SET", PREFIX + "q:" + task_id, request, b"PX", self._linger_ms + LEASE_MS),
            self._do(b"SET", PREFIX + "l:" + task_id, self._owner, b"PX", LEASE_MS),
        )

    async def renew(self, task_id: str) -> None:
        await asyncio.gather(
            self._do(b"PEXPIRE", PREFIX + "l:" + task_id, LEASE_MS),
            self._do(b"PEXPIRE", PREFIX + "q:" + task_id, self._linger_ms + LEASE_MS),
        )

    async def pending(self, task_id: str) -> PendingCall | None:
        """A call started somewhere and not finished; ``ours`` when its lease lapsed and this
        worker took it."""
        raw = await self._do(b"GET", PREFIX + "q:" + task_id)
        if raw is None:
            return None
        ours = bool(await self._do(b"SET", PREFIX + "l:" + task_id, self._owner, b"PX", LEASE_MS, b"NX"))
        request = orjson.loads(raw)
        return PendingCall(request["sid"], request["name"], request["input"], ours)

    # -- the store itself -------------------------------------------------------------------------

    async def grades(self) -> dict[str, int]:
        """Grades saved so far, by outcome (each answer exactly once)."""
        flat = await self._do(b"HGETALL", PREFIX + "grades")
        return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}

    async def healthy(self) -> bool:
        try:
            return bool(await self._redis.call(b"PING") == b"PONG")
        except StoreDown:
            return False

    async def aclose(self) -> None:
        await self._redis.aclose()

    def sweep(self, seconds: float) -> list[Session]:
        return []  # keys expire by themselves
