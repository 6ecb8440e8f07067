"""Connection-level limits that the ASGI app cannot see: header size, deadlines, connection slots.

uvicorn reads request headers without a size limit or a deadline, so a client that sends a
50 MB header or half a request and then waits holds memory and a file descriptor forever
(21,000 such connections exhausted the process's descriptors). :func:`uvicorn_options` gives
uvicorn a protocol that:

* answers 431 past ``max_header_bytes``;
* gives the request line and headers ``header_timeout`` (short: a client sends them in one
  write) and the whole request ``read_timeout``; headers late get 408 with a JSON detail. The
  timer is armed only while a request is incomplete, and once per request: a request that
  arrives in one packet costs nothing extra;
* shares the ``max_connections`` slots between client addresses. A connection that runs no
  request (a keep-alive one between requests, one that has not sent its request, or not all of
  its headers) can give way to a new one: past ``max_connections_per_client`` the address's own
  (a keep-alive one first, else its oldest); at the cap, one of the address holding most, if it
  holds at least as many as the new one's (its own included): never a smaller holder's. A few
  addresses cannot keep another out however many connections they open;
* answers what it refuses with 503, ``Retry-After`` and a JSON detail, then closes after
  reading what the client still sends (briefly, and for a bounded number of connections at
  once), so the client reads the answer instead of a reset.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from envbuilder.server._context import ServerSettings, fair_share, log
from envbuilder.server._lifespan import STOP

_ANSWER = (
    b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%sconnection: close\r\n\r\n%s"
)
RETRY_AFTER = 1
"""Seconds a refused client is asked to wait: slots free as requests finish."""
LINGER = 1.0
"""Seconds a refused connection is read (and dropped) after its answer before it is closed."""
_ARRIVALS = itertools.count()
"""The order connections arrive in (the oldest gives way first)."""
_BARE_CR = re.compile(rb"\r(?!\n)")
_BARE_CR_HINT = (
    "a header holds a carriage return (\\r) that ends no line, as a session id copied from curl's "
    "output or a Windows file keeps; strip it (e.g. `tr -d '\\r'`) and send the request again"
)
"""Why a request with a bare CR in its headers is refused: the usual cause and the fix."""


def _answer(status: bytes, detail: str, retry_after: int | None = None) -> bytes:
    """A whole HTTP response with the server's JSON error shape, closing the connection."""
    body = json.dumps({"detail": detail}).encode()
    extra = b"retry-after: %d\r\n" % retry_after if retry_after is not None else b""
    return _ANSWER % (status, len(body), extra, body)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header size limit, header and request deadlines, and
    fair shares of the connection slots."""

    max_header_bytes = ServerSettings.max_header_bytes
    header_timeout = ServerSettings.header_timeout
    read_timeout = ServerSettings.read_timeout
    max_connections = ServerSettings.max_connections
    max_connections_per_client = ServerSettings.max_connections // 4  # fair_share of the default

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's own cap answers plain text past ``limit_concurrency``; the slots are shared
        # and refused here instead (a connection runs one request at a time, so running
        # requests never outnumber the connections admitted).
        self.limit_concurrency = None

    def shutdown(self) -> None:
        """The server stops: end the tool calls in flight, whose event streams would otherwise
        hold the shutdown (``_lifespan.STOP``), then uvicorn's own shutdown of the connection."""
        stop = self.app_state.get(STOP)
        if stop is not None:
            stop()
        super().shutdown()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_bytes = 0
        self._headers_done = False
        self._rejected = False
        self._reading = False
        self._packet = 0
        self._data = b""
        self._extended = False
        self._timer: asyncio.TimerHandle | None = self.loop.call_later(
            min(self.header_timeout, self.read_timeout), self._timed_out
        )
        self._peer = self.client[0] if self.client else "?"
        state = self.server_state.__dict__
        self._peers: dict[str, int] = state.setdefault("envbuilder_peers", {})
        self._lingering: set[GuardedProtocol] = state.setdefault("envbuilder_lingering", set())
        self._peers[self._peer] = self._peers.get(self._peer, 0) + 1
        self._counted = True
        self._made = next(_ARRIVALS)  # (not the loop's clock: uvloop's is the same all turn)
        self._admit()

    # -- slots -------------------------------------------------------------------------------

    def _admit(self) -> None:
        """Make room for this connection, or refuse it (see the module's docstring)."""
        peers = self._peers
        share = self.max_connections_per_client
        own = peers[self._peer]
        if own > share:  # its own oldest connection that runs no request makes room
            own -= self._evict(own - share, only=self._peer, above=0)
            if own > share:
                self._refuse(f"this address holds its maximum of {share:,} connections; retry shortly")
                return
        cap = self.max_connections
        total = len(self.connections)
        if total > cap:
            # Room is made only at an address holding at least as many as this one (its own
            # included): never at a smaller holder's expense.
            total -= self._evict(total - cap, above=own - 1)
            if total > cap:
                self._refuse(f"the server holds its maximum of {cap:,} connections; retry shortly")

    def _evict(self, wanted: int, *, above: int, only: str | None = None) -> int:
        """Let go of up to ``wanted`` other connections (:meth:`_evictable`) of ``only`` or of
        the addresses holding more than ``above`` connections, the address holding most first.
        How many were let go."""
        peers = self._peers
        candidates = [
            other
            for other in self.connections
            if other is not self
            and isinstance(other, GuardedProtocol)
            and (only is None or other._peer == only)
            and peers.get(other._peer, 0) > above
            and other._evictable()
        ]
        done = 0
        while done < wanted and candidates:
            # The address holding most now (counts change as its connections go); of its
            # connections, a keep-alive one first (its client expects it to close), then the oldest.
            victim = max(candidates, key=lambda c: (peers.get(c._peer, 0), c._kept_alive(), -c._made))
            candidates.remove(victim)
            if peers.get(victim._peer, 0) <= above:
                continue
            victim._let_go()
            done += 1
        return done

    def _evictable(self) -> bool:
        """Whether this connection may give up its slot: no request of it is running (a
        keep-alive connection between requests, one that has not sent its request yet, or not
        all of its headers)."""
        if self._rejected or self.transport.is_closing():
            return False
        return self._idle() or (self._reading and not self._headers_done)

    def _kept_alive(self) -> bool:
        """Open between two requests (its client expects such a connection to close)."""
        return self.cycle is not None and self._idle()

    def _idle(self) -> bool:
        """Between requests (a keep-alive connection, or one that has sent nothing yet)."""
        cycle = self.cycle
        return (
            not self._reading
            and (cycle is None or cycle.response_complete)
            and not self.transport.is_closing()
        )

    def _uncount(self) -> None:
        """Out of the slots now: its ``connection_lost`` comes a loop turn later, after a
        request on another connection may already have been checked against the cap."""
        self.connections.discard(self)
        if self._counted:
            self._counted = False
            left = self._peers.get(self._peer, 1) - 1
            if left > 0:
                self._peers[self._peer] = left
            else:
                self._peers.pop(self._peer, None)

    def _let_go(self) -> None:
        """Give up this connection's slot for another connection: a keep-alive connection
        between requests is closed (as its keep-alive timeout would), one that has not finished
        (or started) its request is answered 503."""
        if self._kept_alive():
            self._uncount()
            self._disarm()
            self.transport.close()
        else:
            self._refuse(
                f"the server holds its maximum of {self.max_connections:,} connections; retry shortly"
            )

    def _refuse(self, detail: str) -> None:
        log.info("refused a connection from %s: %s", self._peer, detail)
        self._end(_answer(b"503 Service Unavailable", detail, RETRY_AFTER))

    def _end(self, reply: bytes) -> None:
        """Send ``reply`` (no request is running: nothing else writes) and close. The client may
        still be sending: closing with its bytes unread would reset the connection before it
        reads the answer, so what it sends is read and dropped until it closes or
        :data:`LINGER` passes (at most ``max_connections // 8`` connections at once; past that
        they are closed at once)."""
        self._rejected = True
        self._uncount()
        self._disarm()
        transport = self.transport
        transport.write(reply)
        if len(self._lingering) >= max(8, self.max_connections // 8) or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self._lingering.add(self)
        self._timer = self.loop.call_later(LINGER, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._lingering.discard(self)
        if self._counted:
            self._uncount()
        super().connection_lost(exc)

    # -- parsing -----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        self._packet = len(data)
        self._data = data  # what the parser failed on, for send_400_response's hint
        super().data_received(data)
        self._data = b""
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
            self._extended = False
            self._timer = self.loop.call_later(min(self.header_timeout, self.read_timeout), self._timed_out)

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
        detail = f"the request line and headers are larger than {self.max_header_bytes} bytes"
        self.transport.write(_answer(b"431 Request Header Fields Too Large", detail))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """A request that cannot be parsed as HTTP/1.1 (a bare CR in a header, a bad request
        line): 400 with the server's one JSON error shape, then close."""
        self._rejected = True
        self._disarm()
        detail = f"the request is not valid HTTP/1.1 ({msg.rstrip('.')})"
        if _BARE_CR.search(self._data.split(b"\r\n\r\n", 1)[0]):
            detail += f": {_BARE_CR_HINT}"
        self.transport.write(_answer(b"400 Bad Request", detail))
        self.transport.close()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        """The request's deadline: headers late get 408; a body still arriving has the rest
        of ``read_timeout`` (the timer is re-armed once), then the connection is closed."""
        self._timer = None
        if self._rejected or self.transport.is_closing():
            return
        # Headers still due, and no response running on the connection (nothing else writes).
        waiting = not self._headers_done or not self._reading
        if waiting and (self.cycle is None or self.cycle.response_complete):
            limit = min(self.header_timeout, self.read_timeout)
            log.info("closed a connection that sent no complete headers in %g s", limit)
            self._end(
                _answer(b"408 Request Timeout", f"the request headers did not arrive within {limit:g} s")
            )
            return
        rest = self.read_timeout - self.header_timeout
        if not self._extended and rest > 0:
            self._extended = True
            self._timer = self.loop.call_later(rest, self._timed_out)
            return
        log.info("closed a connection that sent no complete request in %g s", self.read_timeout)
        self._uncount()
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
        "timeout_graceful_shutdown": settings.graceful_timeout,
        "timeout_keep_alive": KEEP_ALIVE,
        "ws_max_size": settings.max_body_bytes,  # a WebSocket message (the OpenEnv door) is a body
    }


KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open (closed sooner when slots run short)."""


def _limits(settings: ServerSettings) -> dict[str, Any]:
    per_client = settings.max_connections_per_client or fair_share(settings.max_connections)
    return {
        "max_header_bytes": settings.max_header_bytes,
        "header_timeout": settings.header_timeout,
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
