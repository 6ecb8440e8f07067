"""The lean front door: ordinary episode requests are answered without FastAPI's per-request
machinery (dependency solving, middleware stack, response objects); everything else — errors
that need FastAPI's exact shapes, streaming, docs — is handed to the FastAPI app unchanged.

Both doors call the same operations (``_ops``), so behaviour cannot drift: the fast path only
takes a request it can answer exactly as the FastAPI route would, and otherwise replays the
request (with its buffered body) to FastAPI.

Everything both doors share happens here first, for every request: the API key, the bounded
body read (413 without reading a body declared too large), and the one answer to an
unexpected error (:func:`_ops.internal_error`, with ``Connection: close``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from envbuilder.errors import RequestError
from envbuilder.protocol import CallRequest, CreateRequest, SplitRequest, TaskRangeRequest, TaskRequest
from envbuilder.server import _access, _ops, _sse
from envbuilder.server._state import State

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


_SSE_HEADERS = [(k.encode(), v.encode()) for k, v in _sse.HEADERS.items()]


class _Fallback(Exception):
    """The fast path declines: FastAPI answers this request."""


class _TooLarge(Exception):
    """The body is larger than the server takes."""


class FastFront:
    """ASGI callable placed in front of the FastAPI app (see :func:`create_app`)."""

    def __init__(self, state: State, app: ASGIApp, roots: frozenset[str]):
        self.state = state
        self.app = app
        self.roots = roots
        """First path segments of the fixed routes: never redirected to the default environment."""
        self.served = 0
        """Requests answered here (the rest went to FastAPI): a cheap health signal."""
        self.fast = True
        """Answer the ordinary requests here (False: every request goes to FastAPI after the
        shared checks, which is how the tests compare the two doors)."""
        self.keys = _access.Keys(state.settings.api_keys)
        self.root: dict[tuple[str, str], Callable[..., Awaitable[_ops.Reply]]] = {
            ("GET", "health"): self._health,
            ("POST", "create_session"): self._create_session,
            ("POST", "create"): self._create,
            ("POST", "ping"): self._ping,
            ("POST", "delete"): self._delete,
            ("POST", "delete_session"): self._delete_session,
        }
        self.env_routes: dict[tuple[str, str], Callable[..., Awaitable[_ops.Reply]]] = {
            ("GET", "prompt"): self._prompt,
            ("GET", "messages"): self._messages,
            ("GET", "task_tools"): self._task_tools,
            ("GET", "tools"): self._tools,
            ("GET", "splits"): self._splits,
            ("POST", "call"): self._call,
            ("POST", "num_tasks"): self._num_tasks,
            ("POST", "task"): self._task,
            ("POST", "task_range"): self._task_range,
        }

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
        _ops.CLIENT.set((key, scope.get("client")))
        parts = path.split("/")
        first = parts[1].lower() if len(parts) > 1 else ""
        if first not in self.roots and first not in self.state.envs:
            return await _redirect(self.state.default, scope, send)
        method: str = scope["method"]
        body = b""
        if method != "GET" and method != "HEAD":
            try:
                body = await _read_body(headers, receive, self.state.settings.max_body_bytes)
            except _TooLarge:
                limit = self.state.settings.max_body_bytes
                reply = _ops.error_reply(413, f"the request body is larger than {limit:,} bytes")
                return await _answer(send, reply, _ops.CLOSE)
            except _Disconnected:
                return None
        handler = None
        args: tuple[str, ...] = ()
        if self.fast and len(parts) == 2:
            handler = self.root.get((method, first))
        elif self.fast and len(parts) == 3:
            handler = self.env_routes.get((method, parts[2]))
            args = (parts[1],)
        if handler is None:
            return await self._fastapi(scope, body, receive, send)
        extra: dict[str, str] | None = None
        try:
            reply = await handler(headers, body, *args)
        except _Fallback:
            return await self._fastapi(scope, body, receive, send)
        except RequestError as exc:
            reply = _ops.error_reply(exc.status, exc.message)
            extra = dict(exc.headers or {})
        except Exception as exc:
            return await _answer(send, _ops.internal_error(exc, method, path), _ops.CLOSE)
        self.served += 1
        if reply.rest is not None:
            return await _stream(send, reply, reply.rest, self.state.settings.ping_interval)
        await _answer(send, reply, extra)

    async def _fastapi(self, scope: dict[str, Any], body: bytes, receive: Any, send: Any) -> None:
        """Hand the request (its body already read) to FastAPI. Its exception handler answers an
        unexpected error with :func:`_ops.internal_error` and re-raises; that ends here."""
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, _replay(body, receive), tracked)
        except Exception as exc:
            if not started:
                await _answer(send, _ops.internal_error(exc, scope["method"], scope["path"]), _ops.CLOSE)

    # -- root routes -------------------------------------------------------------------------

    async def _health(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return await _ops.health(self.state)

    async def _create_session(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.create_session()

    async def _create(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        request = _parse(CreateRequest, headers, body)  # FastAPI reads the body before the sid
        sid = _sid(headers)
        secrets = headers.get(b"x-secrets")
        return await _ops.create(self.state, sid, request, secrets.decode("latin-1") if secrets else None)

    async def _ping(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return await _ops.ping(self.state, _sid(headers))

    async def _delete(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return await _ops.delete(self.state, _sid(headers))

    async def _delete_session(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.delete_session(_sid(headers))

    # -- environment routes ------------------------------------------------------------------

    async def _tools(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return _ops.Reply(self.state.tools_json[self.state.env(env).name.lower()])

    async def _splits(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return _ops.Reply(self.state.splits_json[self.state.env(env).name.lower()])

    async def _num_tasks(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return _ops.num_tasks(self.state, env, _parse(SplitRequest, headers, body).split)

    async def _task(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        req = _parse(TaskRequest, headers, body)
        return _ops.get_task(self.state, env, req.split, req.index)

    async def _task_range(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        req = _parse(TaskRangeRequest, headers, body)
        return _ops.get_task_range(self.state, env, req.split, req.start, req.stop)

    async def _prompt(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return await _ops.prompt(self.state, _sid(headers))

    async def _messages(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return await _ops.messages(self.state, _sid(headers))

    async def _task_tools(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return await _ops.task_tools(self.state, _sid(headers))

    async def _call(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        request = _parse(CallRequest, headers, body)
        sid = _sid(headers)
        task_id, result = await _ops.open_call(self.state, sid, request.name, request.input, request.task_id)
        if result is None:
            return _ops.Reply(_ops.UNKNOWN_TASK, _ops.SSE)
        if isinstance(result, asyncio.Future):  # streamed: task_id now, the rest when done
            return _ops.Reply(_sse.event("task_id", task_id), _ops.SSE, rest=result)
        frames = result if isinstance(result, bytes) else await result
        return _ops.Reply(_sse.event("task_id", task_id) + frames, _ops.SSE)


class _Disconnected(Exception):
    """The client went away while sending its body."""


async def _stream(send: Any, reply: _ops.Reply, rest: asyncio.Future[bytes], interval: float) -> None:
    """A streamed SSE reply (chunked): its first frames now, keep-alive pings while ``rest``
    runs, then its frames; the same events as the FastAPI route's stream."""
    headers = [(b"content-type", reply.media_type), *_SSE_HEADERS]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body, "more_body": True})
    while True:
        done, _ = await asyncio.wait({rest}, timeout=interval)
        if done:
            break
        await send({"type": "http.response.body", "body": _sse.ping(), "more_body": True})
    await send({"type": "http.response.body", "body": _ops.final_frames(rest)})


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
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _answer(send: Any, reply: _ops.Reply, extra: dict[str, str] | None = None) -> None:
    headers = [(b"content-type", reply.media_type), (b"content-length", b"%d" % len(reply.body))]
    if reply.media_type is _ops.SSE:
        headers += _SSE_HEADERS
    if reply.headers:
        headers += [(k.lower().encode(), v.encode("latin-1")) for k, v in reply.headers.items()]
    if extra:
        headers += [(k.lower().encode(), v.encode("latin-1")) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


def _sid(headers: dict[bytes, bytes]) -> str:
    return _ops.require_sid(headers.get(b"x-session-id", b"").decode("latin-1"))


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


async def _redirect(default: str, scope: dict[str, Any], send: Any) -> None:
    """308 to the default environment (both reference clients rely on it, PROTOCOL.md §1.2).
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
