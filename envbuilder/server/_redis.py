"""The shared session store on Redis (or Valkey): several workers and replicas serve one set of
sessions.

Keys (all under ``eb:``):

``s:<key>``       ``b"<version>:" + JSON of SessionRecord.to_dict()``, expiring after the session
                  timeout; every read renews it (``GETEX``), so the TTL is the reaper. The key
                  is ``SessionRecord.key`` (its creator's name, ``/``, its id): every replica
                  finds a session only for the client that created it.
``c:<call>``      the SSE frames of a finished call, for the re-attach window (``call_linger``);
                  ``<call>`` is ``_sessions.call_key`` (the session's key and the task id).
``q:<call>``      a running call that a client may re-attach to: ``{"sid", "name", "input"}``
                  (``sid``: the session's key), deleted when its result is saved.
``l:<call>``      the lease of the worker running it, renewed while it runs. A worker that is
                  killed stops renewing; the next re-attach takes the lease and runs the call
                  again on the session as last saved, so the dead worker's attempt never counts.
``live``, ``by:<client>``  the sessions held, in all and by client (for the caps).
``grades``        a hash outcome → count of the grades saved (each exactly once).

An episode update is one Lua script (:data:`_SAVE`): it compares the version the caller read,
and only then writes the session, the call's result and the grade count together. Two calls on
one session that read the same version cannot both be saved; the loser re-reads and re-runs
(``_tool_calls.run_call``), and sees the answer the winner counted.

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

from envbuilder.errors import RequestRejected
from envbuilder.server._resp import Address, Connection, StoreDown, StoreReplyError
from envbuilder.server._sessions import Caps, SessionRecord, too_many

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


def _session(raw: bytes) -> SessionRecord:
    version, _, record = raw.partition(b":")
    return SessionRecord.from_dict(orjson.loads(record), int(version))


def _down() -> RequestRejected:
    return RequestRejected(
        503, "the session store is unavailable; retry shortly", headers={"Retry-After": RETRY_AFTER}
    )


# KEYS: session, running call, lease. ARGV: session ttl ms, request, its ttl ms, owner, lease ms.
# A new call in one round trip: read the session (renewing it), announce the call, take its lease.
# The first write is one Redis refuses when out of memory (SET), so a refusal comes before any
# write: once a script has written, Redis lets the rest of it write too.
_BEGIN = """
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return cur
"""


# KEYS: session, live sessions (zset session key -> expiry ms), the client's sessions (the same).
# ARGV: record, session ttl ms, cap in all, cap per client, session key, session key prefix,
# client zset prefix. A new session in one step, counted against both caps. A zset entry's
# score is its session's expiry as last known; entries past it are looked at again (a session
# renewed by use is re-scored, a gone one dropped, from its client's set too: a session key
# starts with its client's name and '/'), so the counts hold however sessions end. A client's
# set does not expire by itself: its sessions may be renewed by use past any expiry it had.
_ADD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, 3 do
  local stale = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now, 'LIMIT', 0, 200)
  for _, sid in ipairs(stale) do
    local left = redis.call('PTTL', ARGV[6] .. sid)
    if left > 0 then redis.call('ZADD', KEYS[i], now + left, sid)
    else
      redis.call('ZREM', KEYS[i], sid)
      local client = string.match(sid, '^([^/]*)/')
      if i == 2 and client then redis.call('ZREM', ARGV[7] .. client, sid) end
    end
  end
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return -1 end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local expiry = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], expiry, ARGV[5])
redis.call('ZADD', KEYS[3], expiry, ARGV[5])
return 1
"""

# KEYS: session, live sessions. ARGV: session key, per-client zset prefix.
_DELETE = """
local cur = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if cur then
  local ok, record = pcall(cjson.decode, string.sub(cur, string.find(cur, ':', 1, true) + 1))
  if ok and type(record.client) == 'string' then redis.call('ZREM', ARGV[2] .. record.client, ARGV[1]) end
end
return 1
"""

_PROBLEMS = {"OOM": "out of memory", "READONLY": "read-only", "MISCONF": "cannot save to disk"}
_REFUSALS = ("OOM", "READONLY", "MISCONF", "NOREPLICAS", "LOADING", "MASTERDOWN", "BUSY")
"""Errors of a store that is up but refuses writes (out of memory, a read-only replica, a
failed disk save, still loading): a client can retry later, the operator must act."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call some worker started and a client re-attaches to."""

    sid: str
    """The key of its session (``SessionRecord.key``)."""
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
        self.problem: str | None = None
        """Why the store is unusable, as last seen (``down``, ``out of memory``, ``read-only``)."""

    async def _do(self, *command: Any) -> Any:
        try:
            return await self._redis.call(*command)
        except StoreDown:
            raise _down() from None
        except StoreReplyError as exc:
            raise self._refused(exc) from None

    async def _eval(self, script: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self._redis.eval(script, keys, args)
        except StoreDown:
            raise _down() from None
        except StoreReplyError as exc:
            raise self._refused(exc) from None

    def _refused(self, exc: StoreReplyError) -> Exception:
        """503 with Retry-After for a store that refuses writes (noted for ``/health``); any
        other error reply is a bug, raised as it is."""
        reason = str(exc).split(" ", 1)[0]
        if reason not in _REFUSALS:
            return exc
        self.problem = _PROBLEMS.get(reason, "refusing writes")
        return RequestRejected(
            503,
            f"the session store refuses writes ({self.problem}); retry shortly",
            headers={"Retry-After": RETRY_AFTER},
        )

    # -- sessions ---------------------------------------------------------------------------------

    async def get(self, key: str) -> SessionRecord | None:
        raw = await self._do(b"GETEX", PREFIX + "s:" + key, b"PX", self._ttl_ms)
        return None if raw is None else _session(raw)

    async def begin(self, key: str, call: str, name: str, tool_input: dict[str, Any]) -> SessionRecord | None:
        """The session of a new call, with the call announced and leased (:meth:`claim`)."""
        request = orjson.dumps({"sid": key, "name": name, "input": tool_input})
        keys = [PREFIX + "s:" + key, PREFIX + "q:" + call, PREFIX + "l:" + call]
        args: list[bytes | str | int] = [
            self._ttl_ms,
            request,
            self._linger_ms + LEASE_MS,
            self._owner,
            LEASE_MS,
        ]
        raw = await self._eval(_BEGIN, keys, args)
        return None if raw is None else _session(raw)

    async def add(self, session: SessionRecord, caps: Caps | None = None) -> bool:
        """Store a new session within ``caps`` (429 or 503 past them, as the memory store);
        True too for a retried create whose first try was saved but not answered (a worker
        killed meanwhile): the stored record is equal (untouched)."""
        # A random first version: a session deleted and created again under the same id while
        # a call on the old one runs cannot be overwritten by that call's save.
        version = secrets.randbits(48)
        record = session.to_json()
        key = PREFIX + "s:" + session.key
        caps = caps or Caps(1 << 62, 1 << 62)
        keys = [key, PREFIX + "live", PREFIX + "by:" + session.client]
        args = [
            b"%d:" % version + record,
            self._ttl_ms,
            caps.total,
            caps.per_client,
            session.key,
            PREFIX + "s:",
            PREFIX + "by:",
        ]
        done = await self._eval(_ADD, keys, args)
        if done == 1:
            session.version = version
            return True
        if done == -1:
            raise too_many("the server holds its maximum of", caps.total, 503)
        if done == -2:
            raise too_many(
                "this client (API key, or address without one) holds its maximum of", caps.per_client, 429
            )
        stored = await self._do(b"GET", key)
        return stored is not None and stored.partition(b":")[2] == record

    async def latest(self, session: SessionRecord) -> SessionRecord | None:
        return session  # just read; ``save`` checks its version

    async def save(self, session: SessionRecord, call: str, frames: bytes, outcome: str | None) -> bool:
        new = b"%d:" % (session.version + 1) + session.to_json()
        keys = [
            PREFIX + "s:" + session.key,
            PREFIX + "c:" + call,
            PREFIX + "grades",
            PREFIX + "q:" + call,
        ]
        args: list[bytes | str | int] = [
            session.version,
            new,
            self._ttl_ms,
            frames,
            self._linger_ms,
            outcome or "",
        ]
        done = await self._eval(_SAVE, keys, args)
        if done == 1:
            session.version += 1
        return bool(done == 1)

    async def delete(self, key: str) -> None:
        await self._eval(_DELETE, [PREFIX + "s:" + key, PREFIX + "live"], [key, PREFIX + "by:"])

    # -- calls ------------------------------------------------------------------------------------

    async def record(self, call: str, frames: bytes) -> None:
        await asyncio.gather(
            self._do(b"SET", PREFIX + "c:" + call, frames, b"PX", self._linger_ms),
            self._do(b"DEL", PREFIX + "q:" + call),
        )

    async def result(self, call: str) -> bytes | None:
        frames: bytes | None = await self._do(b"GET", PREFIX + "c:" + call)
        return frames

    async def claim(self, call: str, key: str, name: str, tool_input: dict[str, Any]) -> None:
        """Announce a running call (re-attachable from any worker) and take its lease."""
        request = orjson.dumps({"sid": key, "name": name, "input": tool_input})
        await asyncio.gather(  # one write: the connection pipelines them
            self._do(b"SET", PREFIX + "q:" + call, request, b"PX", self._linger_ms + LEASE_MS),
            self._do(b"SET", PREFIX + "l:" + call, self._owner, b"PX", LEASE_MS),
        )

    async def renew(self, call: str) -> None:
        """Renew a running call's lease, and its session's timeout: a session is in use while a
        call on it runs (a container's set-up or a test run may outlast the timeout)."""
        session = call.split("\t", 1)[0]  # (``call_key``: the session's key, a tab, the task id)
        await asyncio.gather(
            self._do(b"PEXPIRE", PREFIX + "l:" + call, LEASE_MS),
            self._do(b"PEXPIRE", PREFIX + "q:" + call, self._linger_ms + LEASE_MS),
            self._do(b"PEXPIRE", PREFIX + "s:" + session, self._ttl_ms),
        )

    async def pending(self, call: str) -> PendingCall | None:
        """A call started somewhere and not finished; ``ours`` when its lease lapsed and this
        worker took it."""
        raw = await self._do(b"GET", PREFIX + "q:" + call)
        if raw is None:
            return None
        ours = bool(await self._do(b"SET", PREFIX + "l:" + call, self._owner, b"PX", LEASE_MS, b"NX"))
        request = orjson.loads(raw)
        return PendingCall(request["sid"], request["name"], request["input"], ours)

    # -- the store itself -------------------------------------------------------------------------

    async def grades(self) -> dict[str, int]:
        """Grades saved so far, by outcome (each answer exactly once)."""
        flat = await self._do(b"HGETALL", PREFIX + "grades")
        return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}

    async def healthy(self) -> bool:
        """Whether the store answers and takes writes (a small write with a short expiry);
        :attr:`problem` says what is wrong when it does not."""
        try:
            await self._redis.call(b"SET", PREFIX + "health:" + self._owner.decode(), b"1", b"PX", 5000)
        except StoreDown:
            self.problem = "down"
            return False
        except StoreReplyError as exc:
            refused = self._refused(exc)
            if not isinstance(refused, RequestRejected):
                raise refused from None
            return False
        self.problem = None
        return True

    async def aclose(self) -> None:
        await self._redis.aclose()

    def sweep(self, seconds: float) -> list[SessionRecord]:
        return []  # keys expire by themselves
