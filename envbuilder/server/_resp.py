"""A multiplexed Redis connection: every concurrent command of a worker shares one socket.

Why not redis-py's client: it runs one command per pooled connection and costs about 65 µs of
CPU per command here (its pool, retry and observability layers, and one ``send`` per
command), which made a GSM8K episode on Redis cost four times the in-memory one. Redis answers
the commands of one connection in order, so this client queues a future per command, writes
all the commands issued in one event-loop iteration with one ``write`` (automatic pipelining)
and resolves the futures in order as ``hiredis`` (the parser redis-py itself uses) reads the
replies: about 4 µs per command at concurrency 8 (``bench/README.md``).

Failures: a refused or lost connection, or a reply later than ``timeout``, fails every
pending command with :class:`StoreDown`; the next command reconnects.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass
from typing import Any

try:
    import hiredis
except ImportError:  # the `redis` extra: `check_url` tells how to install it before any use
    hiredis = None  # type: ignore[assignment]


class StoreDown(Exception):
    """Redis cannot be reached (or did not answer in time)."""


class StoreReplyError(Exception):
    """Redis answered a command with an error."""


@dataclass(frozen=True)
class Address:
    """Where a ``redis://``, ``rediss://`` or ``unix://`` URL points."""

    host: str | None
    port: int
    path: str | None
    db: int
    password: str | None
    username: str | None
    tls: bool

    @classmethod
    def parse(cls, url: str) -> Address:
        u = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(u.query)
        user = u.username or None
        if u.scheme == "unix":
            db = int(query.get("db", ["0"])[0])
            return cls(None, 0, u.path, db, u.password, user, False)
        if u.scheme not in ("redis", "rediss"):
            raise ValueError(f"unsupported scheme {u.scheme!r}")
        db = int(u.path.strip("/") or query.get("db", ["0"])[0])
        return cls(
            u.hostname or "localhost", u.port or 6379, None, db, u.password, user, u.scheme == "rediss"
        )


def _pack(args: tuple[Any, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=StoreReplyError)
        self.pending: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.out: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                fut, _ = self.pending.popleft()
                if fut.done():  # its request was cancelled; the reply still comes in order
                    continue
                if isinstance(reply, StoreReplyError):
                    fut.set_exception(reply)
                else:
                    fut.set_result(reply)
        except hiredis.ProtocolError:
            self.fail("a malformed reply")

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail("the connection was lost")

    def fail(self, why: str) -> None:
        self.lost = True
        while self.pending:
            fut, _ = self.pending.popleft()
            if not fut.done():
                fut.set_exception(StoreDown(why))
        if self.transport is not None:
            self.transport.abort()

    def send(self, payload: bytes, deadline: float) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        if not self.out:
            loop.call_soon(self.flush)
        self.out.append(payload)
        fut = loop.create_future()
        self.pending.append((fut, deadline))
        return fut

    def flush(self) -> None:
        if self.transport is not None and not self.lost:
            self.transport.write(b"".join(self.out))
        self.out.clear()


class Connection:
    """One multiplexed connection to ``url``, (re)connected on demand."""

    def __init__(self, url: str, *, connect_timeout: float = 1.0, timeout: float = 5.0):
        self.address = Address.parse(url)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._scripts: dict[str, str] = {}

    async def call(self, *args: Any) -> Any:
        proto = self._proto
        if proto is None or proto.lost:
            proto = await self._connect()
        return await proto.send(_pack(args), time.monotonic() + self.timeout)

    async def eval(self, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a Lua script by its hash (loading it once per connection)."""
        sha = self._scripts.get(script)
        if sha is None:
            sha = self._scripts[script] = hashlib.sha1(script.encode()).hexdigest()
        try:
            return await self.call(b"EVALSHA", sha, len(keys), *keys, *args)
        except StoreReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.call(b"EVAL", script, len(keys), *keys, *args)

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._proto is not None and not self._proto.lost:
                return self._proto
            a = self.address
            loop = asyncio.get_running_loop()
            try:
                if a.path is not None:
                    opening = loop.create_unix_connection(_Protocol, a.path)
                else:
                    tls = ssl.create_default_context() if a.tls else None
                    opening = loop.create_connection(_Protocol, a.host or "localhost", a.port, ssl=tls)
                _, proto = await asyncio.wait_for(opening, self.connect_timeout)
            except (TimeoutError, OSError) as exc:
                raise StoreDown(f"cannot connect ({type(exc).__name__})") from None
            deadline = time.monotonic() + self.timeout
            if a.password:
                auth = (b"AUTH", a.username, a.password) if a.username else (b"AUTH", a.password)
                await proto.send(_pack(auth), deadline)
            if a.db:
                await proto.send(_pack((b"SELECT", a.db)), deadline)
            self._proto = proto
            if self._watchdog is None or self._watchdog.done():
                self._watchdog = asyncio.ensure_future(self._watch())
            return proto

    async def _watch(self) -> None:
        """Fail the connection when its oldest command waits past its deadline (Redis hung)."""
        while True:
            await asyncio.sleep(min(1.0, self.timeout / 2))
            proto = self._proto
            if proto is not None and proto.pending and proto.pending[0][1] < time.monotonic():
                proto.fail("no reply in time")

    async def aclose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
            self._proto = None
