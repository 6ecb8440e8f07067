"""The lean front door: ordinary requests are answered without FastAPI's per-request machinery
(dependency solving, middleware stack, response objects); everything else — bodies that need
FastAPI's exact validation errors, docs, unknown routes — is handed to the FastAPI app unchanged.

Both doors are built from the one route table (``_routes.ROUTES``) and call the same handlers,
so behaviour cannot drift: the fast path takes a route's request only when it can read it
exactly as FastAPI would (a plain JSON body its model accepts), and otherwise replays the request
(with its buffered body) to FastAPI.

Everything both doors share happens here first, for every request: the API key, the bounded
body read (413 once a body passes the limit: a body up to four times the limit is read and dropped
first, so its client reads the 413 rather than a reset connection; a larger one is not read at
all), and the one answer to an
unexpected error (:func:`_reply.internal_error`, with ``Connection: close``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from envbuilder.errors import RequestRejected
from envbuilder.server import _access, _owners
from envbuilder.server._context import ServerContext
from envbuilder.server._headers import require_sid
from envbuilder.server._reply import CLOSE, Reply, error_reply, internal_error
from envbuilder.server._routes import NO_HEADERS, Route
from envbuilder.server._send import reply_headers, send_reply, stream_reply

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class _Fallback(Exception):
    """The fast path declines: FastAPI answers this request."""


class _TooLarge(Exception):
    """The body is larger than the server takes; ``read``: the bytes of it read so far."""

    def __init__(self, read: int):
        super().__init__(read)
        self.read = read


class FastFront:
    """ASGI callable placed in front of the FastAPI app (see :func:`create_app`)."""

    def __init__(self, ctx: ServerContext, app: ASGIApp, routes: Sequence[Route], paths: Iterable[str]):
        self.ctx = ctx
        self.app = app
        self.roots = _roots(paths)
        """First path segments of the fixed routes: never redirected to the default environment."""
        self.served = 0
        """Requests answered here (the rest went to FastAPI): a cheap health signal."""
        self.fast = True
        """Answer the ordinary requests here (False: every request goes to FastAPI after the
        shared checks, which is how the tests compare the two doors)."""
        self.keys = _access.Keys(ctx.settings.api_keys)
        self.root: dict[tuple[str, str], Route] = {}
        """``(method, name)`` of the routes ``/name``."""
        self.env_routes: dict[tuple[str, str], Route] = {}
        """``(method, name)`` of the routes ``/{env_name}/name``."""
        self.header_names: dict[str, tuple[tuple[str, bytes], ...]] = {}
        """Of each route's path, the optional headers it reads: Python name, name on the wire."""
        for route in routes:
            *prefix, name = route.path.strip("/").split("/")
            table = self.env_routes if route.in_env else self.root if not prefix else None
            if table is None:
                raise RuntimeError(f"the fast door cannot answer {route.path!r}")
            table[(route.method, name)] = route
            self.header_names[route.path] = tuple((h, h.replace("_", "-").encode()) for h in route.headers)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = _headers(scope)
        path: str = scope["path"]
        key = None
        if self.keys and path != "/health":
            key = self.keys.match(headers)
            if key is None:
                return await _answer(send, _access.UNAUTHORIZED, _access.CHALLENGE)
        _owners.CLIENT.set((key, scope.get("client")))
        parts = path.split("/")
        first = parts[1].lower() if len(parts) > 1 else ""
        if first not in self.roots and first not in self.ctx.envs:
            try:
                named = self.ctx.deployment(headers.get(b"x-deployment", b"").decode("latin-1"))
            except RequestRejected as exc:
                return await _answer(send, error_reply(exc.status, exc.message))
            if named is None:  # no name given: the reference servers' redirect (docs/protocol.md §1.2)
                return await _redirect(self.ctx.default, scope, send)
            scope = _prefixed(scope, named)
            path = scope["path"]
            parts = path.split("/")
            first = named
        method: str = scope["method"]
        body = b""
        if method != "GET" and method != "HEAD":
            try:
                body = await _read_body(headers, receive, self.ctx.settings.max_body_bytes)
            except _TooLarge as exc:
                limit = self.ctx.settings.max_body_bytes
                await _drain(receive, exc.read, headers, limit)
                reply = error_reply(413, f"the request body is larger than {limit:,} bytes")
                return await _answer(send, reply, CLOSE)
            except _Disconnected:
                return None
        route = None
        env = ""
        if self.fast and len(parts) == 2:
            route = self.root.get((method, first))
        elif self.fast and len(parts) == 3:
            route = self.env_routes.get((method, parts[2]))
            env = parts[1]
        if route is None:
            return await self._fastapi(scope, body, receive, send)
        extra: dict[str, str] | None = None
        try:
            # In FastAPI's order: the body (any problem: FastAPI's 422), then the session id.
            parsed = None if route.body is None else _parse(route.body, headers, body)
            sid = _sid(headers) if route.sid else ""
            read: dict[str, str] | Mapping[str, str] = NO_HEADERS
            if route.headers:  # (inline: /create is on every episode's path)
                read = {}
                for name, wire in self.header_names[route.path]:
                    value = headers.get(wire)
                    if value:
                        read[name] = value.decode("latin-1")
            reply = await route.handler(self.ctx, env, sid, parsed, read)
        except _Fallback:
            return await self._fastapi(scope, body, receive, send)
        except RequestRejected as exc:
            reply = error_reply(exc.status, exc.message)
            extra = dict(exc.headers or {})
        except Exception as exc:
            return await _answer(send, internal_error(exc, method, path), CLOSE)
        self.served += 1
        if reply.chunks is not None:
            return await stream_reply(scope, receive, send, reply)
        await send_reply(send, reply, reply_headers(reply, extra), self.ctx.settings.ping_interval)

    async def _fastapi(self, scope: dict[str, Any], body: bytes, receive: Any, send: Any) -> None:
        """Hand the request (its body already read) to FastAPI. Its exception handler answers an
        unexpected error with :func:`internal_error` and re-raises; that ends here."""
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, _replay(body, receive), tracked)
        except Exception as exc:
            if not started:
                await _answer(send, internal_error(exc, scope["method"], scope["path"]), CLOSE)


class _Disconnected(Exception):
    """The client went away while sending its body."""


def _roots(paths: Iterable[str]) -> frozenset[str]:
    """Like the reference servers: the first segments of all non-parameterised routes (``paths``:
    those of every route the FastAPI application has)."""
    stripped = (p.strip("/") for p in paths)
    return frozenset(p.split("/")[0] for p in stripped if p and not p.startswith("{"))


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    """Header names to values; of a repeated header the first, as Starlette's ``Header()``."""
    raw = scope["headers"]
    headers = dict(raw)
    if len(headers) != len(raw):
        headers = dict(reversed(raw))
    return headers


async def _read_body(headers: dict[bytes, bytes], receive: Any, limit: int) -> bytes:
    """The whole body, or _TooLarge as soon as it (or its declared length) passes ``limit``."""
    declared = headers.get(b"content-length")
    if declared is not None and declared.isdigit() and _larger(declared, limit):
        raise _TooLarge(0)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge(size)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _larger(digits: bytes, limit: int) -> bool:
    """Whether the decimal ``digits`` (a client's header) name more than ``limit``, without
    int() of thousands of digits (which Python refuses)."""
    return len(digits) > 18 or int(digits) > limit


DRAIN_FACTOR = 4
"""A body up to this many times the limit is read (and dropped) before its 413 is sent."""
DRAIN_SECONDS = 2.0


async def _drain(receive: Any, read: int, headers: dict[bytes, bytes], limit: int) -> None:
    """Read and drop the rest of a body that is too large, when it is not much larger than the
    limit (:data:`DRAIN_FACTOR`, :data:`DRAIN_SECONDS`): a client still sending it would
    otherwise see its connection reset instead of the 413. Larger bodies are not read at all."""
    declared = headers.get(b"content-length")
    cap = DRAIN_FACTOR * limit
    if declared is not None and declared.isdigit() and _larger(declared, cap):
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while read <= cap:
                message = await receive()
                if message["type"] == "http.disconnect" or not message.get("more_body", False):
                    return
                read += len(message.get("body", b""))


async def _answer(send: Any, reply: Reply, extra: dict[str, str] | None = None) -> None:
    await send_reply(send, reply, reply_headers(reply, extra))


def _sid(headers: dict[bytes, bytes]) -> str:
    return require_sid(headers.get(b"x-session-id", b"").decode("latin-1"))


def _parse(model: Any, headers: dict[bytes, bytes], body: bytes) -> Any:
    """Validate a JSON body like FastAPI would; anything unusual goes to FastAPI for its 422.
    Only the plain JSON content types are taken here: FastAPI decides on all others."""
    content_type = headers.get(b"content-type", b"")
    if not body or not (content_type == b"application/json" or content_type.startswith(b"application/json;")):
        raise _Fallback
    try:
        return model.model_validate_json(body)
    except ValidationError:
        raise _Fallback from None


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _prefixed(scope: dict[str, Any], env: str) -> dict[str, Any]:
    """``scope`` for the same request under ``/{env}``: a bare path routed by ``X-Deployment``
    is answered in place (no redirect hop), exactly as ``/{env}/...`` would be."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8", "replace")
    return {**scope, "path": f"/{env}{scope['path']}", "raw_path": b"/" + env.encode() + raw}


async def _redirect(default: str, scope: dict[str, Any], send: Any) -> None:
    """308 to the default environment (both reference clients rely on it, docs/protocol.md §1.2).
    The location is built from the raw request target, which holds no CR, LF or non-ASCII."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8", "replace")
    location = b"/" + default.encode() + raw.split(b"?", 1)[0]  # (httpx's test transport adds the query)
    if scope.get("query_string"):
        location += b"?" + scope["query_string"]
    await send(
        {
            "type": "http.response.start",
            "status": 308,
            "headers": [(b"location", location), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
