"""Sessions: small serialisable records in a store, and the in-process store.

A store keeps :meth:`SessionRecord.to_dict` records and the finished results of tool calls (for the
re-attach window). Its methods are coroutines so that a shared store (``_redis.RedisStore``,
for several workers or replicas) can wait on the network; the in-process store never
suspends, so on the default path each method costs one coroutine call and a dict operation.

The contract every store keeps:

* sessions are named by :func:`session_key`, their creator's name and the client's id, so a
  client reaches only the sessions it created (another gets what an unknown id gets);
* ``get`` returns the session and renews its inactivity timeout (None when it is unknown);
* ``add`` stores a new session and returns False when the id is taken;
* ``latest`` re-checks a session held across an await (None when it was deleted meanwhile);
* ``save`` writes a session changed by a tool call together with the call's result, only if
  nobody else saved it since it was read (else False: the caller reads it again and re-runs
  the call), so one answer is never counted twice;
* ``record``/``result`` keep and replay finished call results for the linger window.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from envbuilder.episode import Episode
from envbuilder.errors import RequestRejected
from envbuilder.server._calls import CallRegistry


def session_key(client: str, sid: str) -> str:
    """Where the session ``sid`` of ``client`` (``_owners.client_name``: ``key:<hash>`` or
    ``addr:<address>``) is stored. A client's name has no ``/``, so no two clients' sessions
    share a name whatever ids they choose: a session belongs to its creator by construction."""
    return client + "/" + sid


def call_key(session: str, task_id: str) -> str:
    """Where a tool call of the session stored as ``session`` is kept by its ``task_id``: a
    re-attach finds only its own session's calls. A sid is printable (``_headers.require_sid``),
    so the tab ends it whatever the task id holds."""
    return session + "\t" + task_id


@dataclass
class SessionRecord:
    """The server's record of one ORS session: which environment, and the episode's state
    (kept in the session store; the client's handle is :class:`envbuilder.client.Session`)."""

    sid: str
    env: str
    episode: Episode
    last_seen: float = 0.0
    client: str = ""
    """Who opened it (a hash of its API key, else its address): the session is theirs alone
    (:attr:`key`), and sessions are capped per client."""
    version: int = field(default=0, compare=False)
    """How many times a shared store saved it (its optimistic-concurrency check); not in the record."""

    @property
    def key(self) -> str:
        """Where the store keeps it: :func:`session_key` of its creator and its id."""
        return session_key(self.client, self.sid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sid": self.sid,
            "env": self.env,
            "episode": self.episode.to_dict(),
            "last_seen": self.last_seen,
            "client": self.client,
        }

    def to_json(self) -> bytes:
        """JSON of :meth:`to_dict` without building it: orjson serialises the episode dataclass
        itself (no deep copy; the same JSON, pinned by a test), for the shared store's hot path."""
        return orjson.dumps(
            {
                "sid": self.sid,
                "env": self.env,
                "episode": self.episode,
                "last_seen": self.last_seen,
                "client": self.client,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], version: int = 0) -> SessionRecord:
        return cls(
            sid=data["sid"],
            env=data["env"],
            episode=Episode.from_dict(data["episode"]),
            last_seen=data["last_seen"],
            client=data.get("client", ""),
            version=version,
        )


@dataclass(frozen=True)
class Caps:
    """How many sessions a store holds at once, in all and per client."""

    total: int
    per_client: int


def too_many(what: str, limit: int, status: int) -> RequestRejected:
    """The answer to a session over a cap: 503 for the server's, 429 for a client's share."""
    return RequestRejected(status, f"{what} {limit:,} sessions; retry later", headers={"Retry-After": "5"})


def refuse_over(caps: Caps, total: int, of_client: int) -> None:
    """Raise when one more session would pass ``caps`` (``total`` and ``of_client`` held now)."""
    if total >= caps.total:
        raise too_many("the server holds its maximum of", caps.total, 503)
    if of_client >= caps.per_client:
        raise too_many(
            "this client (API key, or address without one) holds its maximum of", caps.per_client, 429
        )


class Sessions(Protocol):
    """What the routes need of a session store (:class:`SessionStore`, ``_redis.RedisStore``)."""

    shared: bool

    async def get(self, key: str) -> SessionRecord | None: ...
    async def add(self, session: SessionRecord, caps: Caps | None = None) -> bool: ...
    async def latest(self, session: SessionRecord) -> SessionRecord | None: ...
    async def save(self, session: SessionRecord, call: str, frames: bytes, outcome: str | None) -> bool: ...
    async def delete(self, key: str) -> None: ...
    async def begin(
        self, key: str, call: str, name: str, tool_input: dict[str, Any]
    ) -> SessionRecord | None: ...
    async def claim(self, call: str, key: str, name: str, tool_input: dict[str, Any]) -> None: ...
    async def renew(self, call: str) -> None: ...
    async def pending(self, call: str) -> Any: ...
    async def record(self, call: str, frames: bytes) -> None: ...
    async def result(self, call: str) -> bytes | None: ...
    async def healthy(self) -> bool: ...
    async def aclose(self) -> None: ...
    def sweep(self, seconds: float) -> list[SessionRecord]: ...


class SessionStore:
    """The in-process store: one worker's memory. Sessions are kept as live objects (a tool
    call changes its episode in place under the session's lock), idle ones are swept by the
    server's reaper, call results live in the :class:`CallRegistry`. Sessions are found by
    :attr:`SessionRecord.key`, calls by :func:`call_key`.

    The sessions are kept in the order they were last seen (every renewal moves its session to
    the end), so a sweep looks at the expired sessions and the first live one, never at all of
    them: its cost is flat in the number held (100,000 open sessions swept every 5 s were a
    100,000-step scan on the event loop each time)."""

    shared = False
    """Whether several processes can serve the same sessions through this store."""

    def __init__(self, calls: CallRegistry, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # tests pass a fake one: idleness must not depend on a loaded machine
        self._sessions: OrderedDict[str, SessionRecord] = OrderedDict()
        self._calls = calls
        self._per_client: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    async def get(self, key: str) -> SessionRecord | None:
        session = self._sessions.get(key)
        if session is not None:
            session.last_seen = self._clock()
            self._sessions.move_to_end(key)
        return session

    async def add(self, session: SessionRecord, caps: Caps | None = None) -> bool:
        key = session.key
        if key in self._sessions:
            return False
        held = self._per_client.get(session.client, 0)
        if caps is not None:
            refuse_over(caps, len(self._sessions), held)
        session.last_seen = self._clock()
        self._sessions[key] = session
        self._per_client[session.client] = held + 1
        return True

    def _forget(self, session: SessionRecord) -> None:
        held = self._per_client.get(session.client, 0) - 1
        if held > 0:
            self._per_client[session.client] = held
        else:
            self._per_client.pop(session.client, None)

    async def latest(self, session: SessionRecord) -> SessionRecord | None:
        return session if self._sessions.get(session.key) is session else None

    async def save(self, session: SessionRecord, call: str, frames: bytes, outcome: str | None) -> bool:
        if self._sessions.get(session.key) is not session:
            return False
        session.last_seen = self._clock()
        self._sessions.move_to_end(session.key)
        self._calls.finished(call, frames)
        return True

    async def record(self, call: str, frames: bytes) -> None:
        self._calls.finished(call, frames)

    async def result(self, call: str) -> bytes | None:
        return self._calls.replay(call)

    async def delete(self, key: str) -> None:
        session = self._sessions.pop(key, None)
        if session is not None:
            self._forget(session)

    async def begin(self, key: str, call: str, name: str, tool_input: dict[str, Any]) -> SessionRecord | None:
        return await self.get(key)  # (used with shared stores only)

    async def claim(self, call: str, key: str, name: str, tool_input: dict[str, Any]) -> None:
        return None  # only this process can re-attach, through the CallRegistry

    async def renew(self, call: str) -> None:
        return None

    async def pending(self, call: str) -> None:
        return None

    async def healthy(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None

    def idle(self, seconds: float) -> list[str]:
        """Keys of the sessions not seen for more than ``seconds``, the longest idle first."""
        cutoff = self._clock() - seconds
        keys = []
        for key, s in self._sessions.items():  # oldest first: stop at the first one still live
            if s.last_seen >= cutoff:
                break
            keys.append(key)
        return keys

    def sweep(self, seconds: float) -> list[SessionRecord]:
        """Delete the sessions idle for more than ``seconds``; return them."""
        gone = [self._sessions.pop(key) for key in self.idle(seconds)]
        for session in gone:
            self._forget(session)
        return gone
