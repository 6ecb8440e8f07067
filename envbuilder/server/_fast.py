"""The lean front door: ordinary episode requests are answered without FastAPI's per-request
machinery (dependency solving, middleware stack, response objects); everything else — errors
that need FastAPI's exact shapes, streaming, docs — is handed to the FastAPI app unchanged.

Both doors call the same operations (``_ops``), so behaviour cannot drift: the fast path only
takes a request it can answer exactly as the FastAPI route would, and otherwise replays the
request (with its buffered body) to FastAPI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import ValidationError

from envbuilder.errors import RequestError
from envbuilder.protocol import CallRequest, CreateRequest, SplitRequest, TaskRangeRequest, TaskRequest
from envbuilder.server import _ops, _sse
from envbuilder.server._state import State
from envbuilder.server._state import log as _log

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


_SSE_HEADERS = [(k.encode(), v.encode()) for k, v in _sse.HEADERS.items()]


class _Fallback(Exception):
    """The fast path declines: FastAPI answers this request."""


class FastFront:
    """ASGI callable placed in front of the FastAPI app (see :func:`create_app`)."""

    def __init__(self, state: State, app: ASGIApp, roots: frozenset[str]):
        self.state = state
        self.app = app
        self.roots = roots
        """First path segments of the fixed routes: never redirected to the default environment."""
        self.served = 0
        """Requests answered here (the rest went to FastAPI): a cheap health signal."""
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
        path: str = scope["path"]
        parts = path.split("/")
        first = parts[1].lower() if len(parts) > 1 else ""
        if first not in self.roots and first not in self.state.envs:
            return await _redirect(self.state.default, path, scope, send)
        method: str = scope["method"]
        handler = None
        args: tuple[str, ...] = ()
        if len(parts) == 2:
            handler = self.root.get((method, first))
        elif len(parts) == 3:
            handler = self.env_routes.get((method, parts[2]))
            args = (parts[1],)
        if handler is None:
            return await self.app(scope, receive, send)
        body = b""
        if method == "POST":
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
        try:
            reply = await handler(_headers(scope), body, *args)
        except _Fallback:
            return await self.app(scope, _replay(body, receive), send)
        except RequestError as exc:
            if exc.headers:
                return await self.app(scope, _replay(body, receive), send)
            reply = _ops.Reply(orjson.dumps({"detail": exc.message}), _ops.JSON, exc.status)
        except Exception as exc:  # same answer as the FastAPI app's handler
            _log.error("unhandled %s on %s %s", type(exc).__name__, method, path)
            reply = _ops.Reply(
                orjson.dumps({"detail": f"Internal Server Error ({type(exc).__name__})"}), _ops.JSON, 500
            )
        self.served += 1
        headers = [(b"content-type", reply.media_type), (b"content-length", b"%d" % len(reply.body))]
        if reply.media_type is _ops.SSE:
            headers += _SSE_HEADERS
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})

    # -- root routes -------------------------------------------------------------------------

    async def _health(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.HEALTH

    async def _create_session(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.create_session()

    async def _create(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        sid = _sid(headers)
        request = _parse(CreateRequest, headers, body)
        secrets = headers.get(b"x-secrets")
        return _ops.create(self.state, sid, request, secrets.decode("latin-1") if secrets else None)

    async def _ping(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.ping(self.state, _sid(headers))

    async def _delete(self, headers: dict[bytes, bytes], body: bytes) -> _ops.Reply:
        return _ops.delete(self.state, _sid(headers))

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
        return _ops.prompt(self.state, _sid(headers))

    async def _messages(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return _ops.messages(self.state, _sid(headers))

    async def _task_tools(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        return _ops.task_tools(self.state, _sid(headers))

    async def _call(self, headers: dict[bytes, bytes], body: bytes, env: str) -> _ops.Reply:
        sid = _sid(headers)
        request = _parse(CallRequest, headers, body)
        session = _ops.session_of(self.state, sid)
        if self.state.envs[session.env].is_blocking(request.name):
            raise _Fallback  # waits on I/O: FastAPI streams it with keep-alive pings
        task_id, result = _ops.start_call(self.state, session, request.name, request.input, request.task_id)
        if result is None:
            return _ops.Reply(_ops.UNKNOWN_TASK, _ops.SSE)
        if isinstance(result, asyncio.Future):
            raise _Fallback  # re-attached to a call still running: FastAPI streams it
        frames = result if isinstance(result, bytes) else await result
        return _ops.Reply(_sse.event("task_id", task_id) + frames, _ops.SSE)


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    return dict(scope["headers"])


def _sid(headers: dict[bytes, bytes]) -> str:
    return _ops.require_sid(headers.get(b"x-session-id", b"").decode("latin-1"))


def _parse(model: Any, headers: dict[bytes, bytes], body: bytes) -> Any:
    """Validate a JSON body like FastAPI would; anything unusual goes to FastAPI for its 422."""
    if not headers.get(b"content-type", b"").startswith(b"application/json") or not body:
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


async def _redirect(default: str, path: str, scope: dict[str, Any], send: Any) -> None:
    """308 to the default environment (both reference clients rely on it, PROTOCOL.md §1.2)."""
    location = f"/{default}{path}"
    if scope.get("query_string"):
        location += "?" + scope["query_string"].decode("latin-1")
    await send(
        {
            "type": "http.response.start",
            "status": 308,
            "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
