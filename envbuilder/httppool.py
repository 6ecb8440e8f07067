"""A bounded HTTP/1.1 connection pool for httpx whose cost per request is the same at any queue.

Why not httpx's own pool: httpcore 1.0's pool, on every request's start and end, walks its
connections once per idle connection (``len([c.is_idle() for c in connections])``) and every
queued request against every connection, so a burst of answers over 100 connections costs about
10,000 checks per request, and thousands of queued requests cost the square of the queue (1,024
requests in flight through a client did not finish in 125 s; NeMo Gym saw 16,000 hang for 40
minutes). Callers here (a trainer's thousands of episodes, ``envbuilder eval`` against a slow
model) put far more requests in flight than there are connections.

:class:`PoolTransport` keeps one :class:`_HostPool` per origin (scheme, host, port): a stack of
idle connections and a FIFO queue of waiters. A request takes the idle connection used last (its
socket is the likeliest still open), or opens one while fewer than ``max_connections`` are open,
or waits in arrival order until a finishing request hands its connection (or its free slot)
over. Each step is O(1) whatever the number waiting; an idle connection past its keep-alive or
closed by the server is dropped when it is next looked at, and the oldest idle one is checked on
every release, so stale sockets do not pile up at the bottom of the stack.

Timeouts are httpx's: connect, read and write apply to the connection; ``pool`` bounds the wait
for a connection (``None``: wait as long as it takes, for callers that chose how many requests
to put in flight). Errors are httpx's exception types, as with its own transport.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["PoolTransport"]

#: httpcore's exceptions and the httpx ones the callers catch (most specific first by MRO).
_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


def _check_url(request: httpx.Request) -> None:
    """Refuse a URL without an http(s) scheme or a host as httpx's own transport does (httpcore
    would fail with a KeyError looking up the scheme's default port)."""
    url, scheme = request.url, request.url.scheme
    if not scheme:
        problem = "is missing an 'http://' or 'https://' protocol"
    elif scheme not in ("http", "https"):
        problem = f"has an unsupported protocol '{scheme}://'"
    elif not url.host:
        problem = "has no host"
    else:
        return
    raise httpx.UnsupportedProtocol(f"Request URL {str(url)!r} {problem}", request=request)


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for kind in type(exc).__mro__:
            if kind in _ERRORS:
                raise _ERRORS[kind](str(exc)) from exc
        raise


class _HostPool:
    """The connections to one origin: at most ``size`` open, idle ones stacked, waiters FIFO."""

    def __init__(self, origin: httpcore.Origin, size: int, make: Any):
        self.origin = origin
        self.size = size
        self._make = make
        self.open = 0
        """Connections open or being opened (a slot handed to a waiter counts)."""
        self.peak = 0
        self._idle: collections.deque[httpcore.AsyncConnectionInterface] = collections.deque()
        # A waiter's future gets a connection, or None: "a slot is yours, open one".
        self._waiters: collections.deque[asyncio.Future[httpcore.AsyncConnectionInterface | None]] = (
            collections.deque()
        )
        self._closing: set[asyncio.Task[None]] = set()
        self.closed = False

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def waiting(self) -> int:
        """Waiters in the queue (one that gave up stays until a release skips it)."""
        return len(self._waiters)

    def _new(self) -> httpcore.AsyncConnectionInterface:
        self.peak = max(self.peak, self.open)
        return self._make(self.origin)  # connects on its first request

    async def acquire(self, timeout: float | None) -> httpcore.AsyncConnectionInterface:
        if self.closed:
            raise RuntimeError("the connection pool is closed")
        while self._idle:
            conn = self._idle.pop()
            if conn.is_idle() and not conn.has_expired():
                return conn
            self._drop(conn)
        if self.open < self.size:
            self.open += 1
            return self._new()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[httpcore.AsyncConnectionInterface | None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, self._expire, waiter, timeout)
        try:
            handed_over = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed over while being cancelled
                handed = waiter.result()
                if handed is None:
                    self.open -= 1  # the slot was counted for this waiter: count it for the next
                self._pass_on(handed)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if handed_over is None:
            return self._new()
        if handed_over.is_idle() and not handed_over.has_expired():
            return handed_over
        # Closed by the server while this waiter waited to run (a loaded loop can take longer
        # than a server's keep-alive of a few seconds): reopen in its slot, the old socket first
        # closed so the sockets open stay within the limit.
        try:
            await handed_over.aclose()
        except BaseException:
            self._freed()
            raise
        return self._new()

    @staticmethod
    def _expire(waiter: asyncio.Future[Any], timeout: float) -> None:
        if not waiter.done():  # left in the queue, skipped by the next release
            waiter.set_exception(httpcore.PoolTimeout(f"no connection free within {timeout} s"))

    def release(self, conn: httpcore.AsyncConnectionInterface) -> None:
        """``conn``'s request is over: reuse it, or drop it and pass its slot on."""
        if self.closed or not conn.is_idle() or conn.has_expired():
            self._drop(conn)
        else:
            self._pass_on(conn)
        if len(self._idle) > 1 and self._idle[0].has_expired():  # the oldest idle one
            self._drop(self._idle.popleft())

    def _pass_on(self, conn: httpcore.AsyncConnectionInterface | None) -> None:
        """Hand ``conn`` (None: a free slot) to the first live waiter, else keep it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                if conn is None:
                    self.open += 1
                waiter.set_result(conn)
                return
        if conn is not None:
            if self.closed:
                self._drop(conn)
            else:
                self._idle.append(conn)

    def _drop(self, conn: httpcore.AsyncConnectionInterface) -> None:
        """Close ``conn``; its slot is free (and passed on) once its socket is closed, so the
        sockets open never exceed ``size`` even while a busy loop has closes pending."""
        if conn.is_closed():
            self._freed()
            return
        task = asyncio.get_running_loop().create_task(conn.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        self._freed()

    def _freed(self) -> None:
        self.open -= 1
        self._pass_on(None)

    async def aclose(self) -> None:
        self.closed = True
        idle, self._idle = list(self._idle), collections.deque()
        self.open -= len(idle)
        for conn in idle:
            await conn.aclose()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(RuntimeError("the connection pool is closed"))
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class _Body(httpx.AsyncByteStream):
    """A response body; closing it gives its connection back to the pool."""

    def __init__(self, stream: Any, pool: _HostPool, conn: httpcore.AsyncConnectionInterface):
        self._stream = stream
        self._pool: _HostPool | None = pool
        self._conn = conn

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for chunk in self._stream:
                yield chunk

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            with _mapped():
                await self._stream.aclose()
        finally:
            pool.release(self._conn)


class PoolTransport(httpx.AsyncBaseTransport):
    """An httpx transport over HTTP/1.1 with at most ``max_connections`` per origin, kept alive
    ``keepalive_expiry`` seconds, the requests past that waiting in arrival order (O(1) each)."""

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 60.0,
        verify: bool | Callable[[], ssl.SSLContext] = True,
    ):
        """``verify``: check servers' certificates (a context made on the first https
        connection), or a function giving the TLS context to use (shared between transports)."""
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._hosts: dict[tuple[bytes, bytes, int], _HostPool] = {}

    def host(self, origin: httpcore.Origin) -> _HostPool:
        key = (origin.scheme, origin.host, origin.port)  # httpcore's Origin is not hashable
        pool = self._hosts.get(key)
        if pool is None:
            pool = self._hosts[key] = _HostPool(origin, self.max_connections, self._connection)
        return pool

    @property
    def peak_connections(self) -> int:
        """The most connections open at once to any one origin so far."""
        return max((p.peak for p in self._hosts.values()), default=0)

    def _connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        if origin.scheme == b"https" and self._ssl is None:
            verify = self._verify  # loads certifi: on first use
            self._ssl = verify() if callable(verify) else httpx.create_ssl_context(verify=verify)
        return httpcore.AsyncHTTPConnection(
            origin,
            ssl_context=self._ssl if origin.scheme == b"https" else None,
            keepalive_expiry=self.keepalive_expiry,
            http1=True,
            http2=False,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        _check_url(request)
        url = httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        )
        core = httpcore.Request(
            method=request.method,
            url=url,
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        pool = self.host(url.origin)
        timeout = request.extensions.get("timeout", {}).get("pool")
        with _mapped():
            conn = await pool.acquire(timeout)
        try:
            with _mapped():
                response = await conn.handle_async_request(core)
        except BaseException:
            pool.release(conn)  # closed by httpcore when the request broke off: dropped
            raise
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream, pool, conn),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        for pool in self._hosts.values():
            await pool.aclose()
