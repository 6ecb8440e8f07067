"""Connection-level limits that the ASGI app cannot see: header size and read timeouts.

uvicorn reads request headers without a size limit or a deadline, so a client that sends a
50 MB header or half a request and then waits holds memory and a file descriptor forever
(21,000 such connections exhausted the process's descriptors). :func:`uvicorn_options` gives
uvicorn a protocol that answers 431 past ``max_header_bytes`` and closes a connection that has
not sent its whole request within ``read_timeout``, plus uvicorn's own cap on connections and
its bounded graceful shutdown. The timer is only armed while a request is incomplete: a
request that arrives in one packet costs nothing extra.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from envbuilder.server._state import ServerSettings, fair_share, log

_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
)
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header size limit, a request read deadline, and
    fair shares of the connection slots."""

    max_header_bytes = ServerSettings.max_header_bytes
    read_timeout = ServerSettings.read_timeout
    max_connections = ServerSettings.max_connections
    max_connections_per_client = ServerSettings.max_connections // 4  # fair_share of the default

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_bytes = 0
        self._headers_done = False
        self._rejected = False
        self._reading = False
        self._packet = 0
        self._timer: asyncio.TimerHandle | None = self.loop.call_later(self.read_timeout, self._timed_out)
        self._peer = self.client[0] if self.client else "?"
        peers: dict[str, int] = self.server_state.__dict__.setdefault("envbuilder_peers", {})
        peers[self._peer] = peers.get(self._peer, 0) + 1
        self._admit(peers)

    def _admit(self, peers: dict[str, int]) -> None:
        """Make room for this connection: past the per-client share or near the server's cap,
        close idle keep-alive connections (that client's first); close this one when that
        does not make room, before it can hold a descriptor."""
        own = peers[self._peer]
        if own > self.max_connections_per_client:
            own -= self._close_idle(own - self.max_connections_per_client, self._peer)
            if own > self.max_connections_per_client:
                log.info("closed a connection over its client's share of %d", self.max_connections_per_client)
                self.transport.close()
                return
        high_water = max(1, self.max_connections - max(1, self.max_connections // 16))
        total = len(self.connections)
        if total > high_water:
            total -= self._close_idle(total - high_water, None)
            if total > self.max_connections:
                log.info("closed a connection over the cap of %d", self.max_connections)
                self.transport.close()

    def _close_idle(self, wanted: int, peer: str | None) -> int:
        """Close up to ``wanted`` idle connections (of ``peer``, or anyone's); how many."""
        closed = 0
        for other in list(self.connections):
            if closed >= wanted:
                break
            if other is self or not isinstance(other, GuardedProtocol) or not other._idle():
                continue
            if peer is None or other._peer == peer:
                other.transport.close()
                # Out of the count now: its connection_lost comes a loop turn later, after a
                # request on this connection may already have been checked against the cap.
                self.connections.discard(other)
                closed += 1
        return closed

    def _idle(self) -> bool:
        """Between requests (a keep-alive connection, or one that has sent nothing yet)."""
        cycle = self.cycle
        return (
            not self._reading
            and (cycle is None or cycle.response_complete)
            and not self.transport.is_closing()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        peers: dict[str, int] = self.server_state.__dict__.get("envbuilder_peers", {})
        left = peers.get(self._peer, 1) - 1
        if left > 0:
            peers[self._peer] = left
        else:
            peers.pop(self._peer, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        self._packet = len(data)
        super().data_received(data)
        if self._rejected:
            return
        if self._reading and not self._headers_done:
            # Still inside the request line and headers after this packet: all of it counts
            # (counted per packet, not per header, to keep the common path cheap).
            self._header_bytes += len(data)
            if self._header_bytes > self.max_header_bytes:
                self._reject()
                return
        if self._reading and self._timer is None:
            self._timer = self.loop.call_later(self.read_timeout, self._timed_out)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._headers_done = False
        self._reading = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if self._header_bytes + self._packet > self.max_header_bytes:  # only then count exactly
            size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            if size > self.max_header_bytes:
                self._reject()
                return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._rejected:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._reading = False
        self._disarm()
        if not self._rejected:
            super().on_message_complete()

    def _reject(self) -> None:
        """Answer 431 and close: the request line and headers passed the limit."""
        self._rejected = True
        self._disarm()
        body = b'{"detail":"the request line and headers are larger than %d bytes"}' % self.max_header_bytes
        self.transport.write(_TOO_LARGE % (len(body), body))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """A request that cannot be parsed as HTTP/1.1 (a bare CR in a header, a bad request
        line): 400 with the server's one JSON error shape, then close."""
        self._rejected = True
        self._disarm()
        body = json.dumps({"detail": f"the request is not valid HTTP/1.1 ({msg.rstrip('.')})"}).encode()
        self.transport.write(_BAD_REQUEST % (len(body), body))
        self.transport.close()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            log.info("closed a connection that sent no complete request in %g s", self.read_timeout)
            self.transport.close()


def uvicorn_options(settings: ServerSettings, *, workers: int = 1) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config`` / ``uvicorn.run`` that apply ``settings``.

    With several workers uvicorn spawns fresh interpreters and pickles its config, so the
    protocol is named by its import path and each worker's app factory sets its limits
    (:func:`set_protocol_limits`)."""
    protocol: Any = f"{__name__}:GuardedProtocol"
    if workers == 1:
        protocol = type("GuardedProtocol", (GuardedProtocol,), _limits(settings))
    _raise_descriptor_limit(settings.max_connections)
    return {
        "http": protocol,
        "limit_concurrency": settings.max_connections,
        "timeout_graceful_shutdown": settings.graceful_timeout,
        "timeout_keep_alive": KEEP_ALIVE,
    }


KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open (closed sooner when slots run short)."""


def _limits(settings: ServerSettings) -> dict[str, Any]:
    per_client = settings.max_connections_per_client or fair_share(settings.max_connections)
    return {
        "max_header_bytes": settings.max_header_bytes,
        "read_timeout": settings.read_timeout,
        "max_connections": settings.max_connections,
        "max_connections_per_client": per_client,
    }


def _raise_descriptor_limit(connections: int) -> None:
    """Let this process hold ``connections`` sockets plus its files: the soft descriptor limit
    is often 1,024, under the default cap of connections."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = connections + 256
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(
                resource.RLIMIT_NOFILE,
                (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard),
            )
    except (ImportError, ValueError, OSError):
        pass


def set_protocol_limits(settings: ServerSettings) -> None:
    """Give this process's :class:`GuardedProtocol` the limits of ``settings`` (a worker)."""
    for name, value in _limits(settings).items():
        setattr(GuardedProtocol, name, value)
    _raise_descriptor_limit(settings.max_connections)
