"""The OpenEnv door's routes, under ``/openenv`` (the default environment) and
``/openenv/{env_name}``: the WebSocket ``/ws`` OpenEnv's clients use, and ``/reset``, ``/step``,
``/state``, ``/schema``, ``/metadata``, ``/health`` over HTTP (see ``_openenv``), MCP's JSON-RPC
at ``/mcp`` (see ``_openenv_mcp``), and the door's own ``/openapi.json`` (the server's OpenAPI
document seen from the door, which ``openenv validate --url`` reads).

The HTTP routes pass the server's front door like every other route (API key, bounded body,
one JSON error shape). The WebSocket skips it (it is not HTTP), so its handshake checks the
same API key here and is refused with 401 (403 where the server cannot send a body) before it
is accepted; each message is bounded by ``--max-body-bytes`` (uvicorn's ``ws_max_size``); a
connection that sends nothing for ``--session-timeout`` seconds is closed, and its episode is
deleted when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from pydantic import TypeAdapter, ValidationError
from starlette.responses import JSONResponse

from envbuilder.errors import RequestRejected
from envbuilder.server import _access, _headers, _openenv, _openenv_mcp, _ops, _owners
from envbuilder.server._context import ServerContext
from envbuilder.server._reply import Reply
from envbuilder.server._responses import ReplyResponse
from envbuilder.server._routes import errors

log = logging.getLogger("envbuilder.server")

router = APIRouter(prefix=_openenv.PREFIX, tags=["openenv"])

_ACTION: TypeAdapter[Any] = TypeAdapter(_openenv.Action)


def _state(request: Request | WebSocket) -> ServerContext:
    return request.app.state.context


def _json(content: Any) -> Response:
    return ReplyResponse(Reply(orjson.dumps(content)))


def _episode_id(value: str | None) -> str:
    if not value:
        raise RequestRejected(
            400,
            "an HTTP step or state names its episode: send the episode_id its reset returned "
            "(or play over the WebSocket, {base}/ws)",
        )
    return _headers.require_sid(value)


# -- HTTP ---------------------------------------------------------------------------------------

_RESET_DOC = "Start an episode; its ``episode_id`` is in the observation (an ORS session id)."
_STEP_DOC = "Run an action (``call_tool`` or ``list_tools``) in the episode ``episode_id``."


async def _reset(
    request: Request, env_name: str | None, body: _openenv.ResetRequest | None, secrets: str | None
) -> Response:
    _, payload = await _openenv.reset(_state(request), env_name, body or _openenv.ResetRequest(), secrets)
    return _json(payload)


async def _step(request: Request, body: dict[str, Any]) -> Response:
    sid = _episode_id(body.get("episode_id"))
    if "action" not in body:
        raise RequestRejected(422, 'a step\'s body is {"action": {...}, "episode_id": "..."}')
    extra = set(body) - {"action", "episode_id", "timeout_s", "request_id"}
    if extra:
        raise RequestRejected(422, f"unknown field(s) in a step's body: {', '.join(sorted(extra))}")
    try:
        action = _ACTION.validate_python(body["action"])
    except ValidationError as exc:
        raise RequestRejected(422, f"invalid action: {_problems(exc)}") from None
    return _json(await _openenv.step(_state(request), sid, action))


StepBody = Annotated[dict[str, Any], Body(description='{"action": {...}, "episode_id": "..."}')]
Secrets = Annotated[str | None, Header(alias="x-secrets")]
EpisodeId = Annotated[str | None, Query()]


@router.post("/reset", responses=errors(400, 401, 404, 413, 503), summary="Reset (default environment)")
async def reset(
    request: Request, body: _openenv.ResetRequest | None = None, x_secrets: Secrets = None
) -> Response:
    return await _reset(request, None, body, x_secrets)


@router.post("/step", responses=errors(400, 401, 404, 410, 413), summary="Step")
async def step(request: Request, body: StepBody) -> Response:
    return await _step(request, body)


@router.get("/state", responses=errors(400, 401, 404), summary="ServerContext")
async def state(request: Request, episode_id: EpisodeId = None) -> Response:
    return _json(await _openenv.episode_state(_state(request), _episode_id(episode_id)))


@router.get("/schema", summary="JSON Schemas of the action, observation and state")
async def schema() -> Response:
    return _json(_openenv.schema())


@router.get("/metadata", responses=errors(401), summary="The default environment's metadata")
async def metadata(request: Request) -> Response:
    state_ = _state(request)
    return _json(_openenv.metadata(state_.envs[state_.default]))


@router.get("/health", summary="Liveness, as OpenEnv answers it")
async def health(request: Request) -> Response:
    reply = await _ops.health(_state(request))
    if reply.status != 200:
        return ReplyResponse(reply)
    return _json({"status": "healthy"})


@router.post("/{env_name}/reset", responses=errors(400, 401, 404, 413, 503), summary="Reset")
async def env_reset(
    env_name: str, request: Request, body: _openenv.ResetRequest | None = None, x_secrets: Secrets = None
) -> Response:
    _state(request).env(env_name)
    return await _reset(request, env_name, body, x_secrets)


@router.post("/{env_name}/step", responses=errors(400, 401, 404, 410, 413), summary="Step")
async def env_step(env_name: str, request: Request, body: StepBody) -> Response:
    _state(request).env(env_name)
    return await _step(request, body)


@router.get("/{env_name}/state", responses=errors(400, 401, 404), summary="ServerContext")
async def env_state(env_name: str, request: Request, episode_id: EpisodeId = None) -> Response:
    _state(request).env(env_name)
    return _json(await _openenv.episode_state(_state(request), _episode_id(episode_id)))


@router.get("/{env_name}/schema", responses=errors(401, 404), summary="JSON Schemas")
async def env_schema(env_name: str, request: Request) -> Response:
    _state(request).env(env_name)
    return _json(_openenv.schema())


@router.get("/{env_name}/metadata", responses=errors(401, 404), summary="An environment's metadata")
async def env_metadata(env_name: str, request: Request) -> Response:
    return _json(_openenv.metadata(_state(request).env(env_name)))


@router.get("/{env_name}/health", responses=errors(401, 404), summary="Liveness")
async def env_health(env_name: str, request: Request) -> Response:
    _state(request).env(env_name)
    return await health(request)


@router.post("/mcp", responses=errors(401, 413), summary="MCP JSON-RPC (tools/list, tools/call)")
async def mcp(request: Request, x_secrets: Secrets = None) -> Response:
    return await _mcp(request, None, x_secrets)


@router.post("/{env_name}/mcp", responses=errors(401, 404, 413), summary="MCP JSON-RPC")
async def env_mcp(env_name: str, request: Request, x_secrets: Secrets = None) -> Response:
    _state(request).env(env_name)
    return await _mcp(request, env_name, x_secrets)


async def _mcp(request: Request, env_name: str | None, secrets: str | None) -> Response:
    """One JSON-RPC request; its errors are JSON-RPC errors in a 200 answer, as OpenEnv's."""
    try:
        raw = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        return _json(_openenv_mcp.error(_openenv_mcp.PARSE_ERROR, f"Parse error: {exc}"))
    parsed = _openenv_mcp.parse(raw)
    if isinstance(parsed, dict):
        return _json(parsed)
    episodes = _openenv_mcp.Episodes(_state(request), env_name, secrets)
    return _json(await _openenv_mcp.handle(episodes, parsed))


@router.get("/openapi.json", summary="The OpenAPI document of the door (default environment)")
async def door_openapi(request: Request) -> Response:
    return _json(_door_openapi(request, _openenv.PREFIX))


@router.get("/{env_name}/openapi.json", responses=errors(401, 404), summary="The door's OpenAPI document")
async def env_door_openapi(env_name: str, request: Request) -> Response:
    _state(request).env(env_name)
    return _json(_door_openapi(request, f"{_openenv.PREFIX}/{{env_name}}"))


def _door_openapi(request: Request, prefix: str) -> dict[str, Any]:
    """The server's OpenAPI document with only the door's routes under ``prefix``, their paths
    relative to it (``/reset``, ``/step``, ...), as OpenEnv's own server lists them."""
    document = dict(request.app.openapi())
    paths = document.get("paths", {})
    document["paths"] = {
        path[len(prefix) :]: item
        for path, item in paths.items()
        if path.startswith(prefix + "/")
        and "/" not in path[len(prefix) + 1 :].rstrip("/")
        and not path[len(prefix) + 1 :].startswith("{")
    }
    return document


# -- WebSocket ----------------------------------------------------------------------------------


@router.websocket("/ws")
async def websocket(ws: WebSocket) -> None:
    await _play(ws, None)


@router.websocket("/{env_name}/ws")
async def env_websocket(ws: WebSocket, env_name: str) -> None:
    await _play(ws, env_name)


async def _refuse(ws: WebSocket, status: int, detail: str) -> None:
    """Refuse a handshake with ``status`` and the JSON error shape where the server can send a
    response to a WebSocket handshake (uvicorn can), else close it (which uvicorn answers 403)."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(JSONResponse({"detail": detail}, status))
    else:
        await ws.close(code=1008, reason=detail[:120])


async def _play(ws: WebSocket, env_name: str | None) -> None:
    """One WebSocket connection: at most one episode at a time, deleted when it closes."""
    state = _state(ws)
    keys = _access.Keys(state.settings.api_keys)
    headers = dict(ws.scope["headers"])
    key = keys.match(headers) if keys else None
    if keys and key is None:
        return await _refuse(ws, 401, "an API key is required: send it in the X-API-Key header")
    _owners.CLIENT.set((key, ws.scope.get("client")))
    if env_name is not None and env_name.lower() not in state.envs:
        return await _refuse(ws, 404, state.unknown(env_name))
    secrets = headers.get(b"x-secrets")
    session = _Connection(state, env_name, secrets.decode("latin-1") if secrets else None)
    await ws.accept()
    try:
        while True:
            try:
                async with asyncio.timeout(state.settings.session_timeout):
                    raw = await ws.receive_text()
            except TimeoutError:
                await ws.close(code=1000, reason="no message for the session timeout")
                return
            answer = await session.answer(raw)
            if answer is None:
                await ws.close(code=1000)
                return
            await ws.send_text(answer)
    except WebSocketDisconnect:
        pass
    finally:
        await session.end()


class _Connection:
    """The episode of one WebSocket connection."""

    def __init__(self, state: ServerContext, env_name: str | None, secrets: str | None):
        self.state = state
        self.env_name = env_name
        self.secrets = secrets
        self.sid: str | None = None

    async def end(self) -> None:
        if self.sid is not None:
            sid, self.sid = self.sid, None
            with contextlib.suppress(Exception):  # the store is down: the reaper deletes it later
                await self.state.delete(_owners.owned(sid))

    async def answer(self, raw: str) -> str | None:
        """The answer to one message (None: ``close``)."""
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _error(f"Invalid JSON: {exc}", "INVALID_JSON")
        if not isinstance(message, dict):
            return _error("a message is a JSON object with a type", "VALIDATION_ERROR")
        kind = message.get("type")
        try:
            if kind == "reset":
                data = _openenv.ResetRequest.model_validate(message.get("data") or {})
                await self.end()
                self.sid, payload = await _openenv.reset(self.state, self.env_name, data, self.secrets)
                return _reply("observation", payload)
            if kind == "step":
                action = _ACTION.validate_python(message.get("data"))
                return _reply("observation", await _openenv.step(self.state, self._sid(), action))
            if kind == "state":
                return _reply("state", await _openenv.episode_state(self.state, self._sid()))
            if kind == "close":
                return None
            if kind == "mcp":
                return _reply("mcp", await self._mcp(message.get("data")))
            return _error(
                f"Unknown message type: {kind!r}; expected reset, step, state, mcp or close", "UNKNOWN_TYPE"
            )
        except ValidationError as exc:
            return _error(f"Invalid message: {_problems(exc)}", "VALIDATION_ERROR")
        except RequestRejected as exc:
            return _error(exc.message, _CODES.get(exc.status, "EXECUTION_ERROR"), exc.status)
        except Exception as exc:  # the server's own bug: never its message (it may hold a secret)
            log.error("unhandled %s in an OpenEnv %s message", type(exc).__name__, kind)
            return _error(f"Internal Server Error ({type(exc).__name__})", "EXECUTION_ERROR", 500)

    async def _mcp(self, data: Any) -> dict[str, Any]:
        """A JSON-RPC request on the connection's episode (``openenv/session/create`` with
        parameters starts another, as a reset does)."""
        request = _openenv_mcp.parse(data)
        if isinstance(request, dict):
            return request
        episodes = _openenv_mcp.Episodes(self.state, self.env_name, self.secrets)
        episodes.connection, episodes.bound = True, self.sid
        try:
            return await _openenv_mcp.handle(episodes, request)
        finally:
            self.sid = episodes.bound

    def _sid(self) -> str:
        if self.sid is None:
            raise RequestRejected(400, "no episode on this connection: send reset first")
        return self.sid


_CODES = {400: "SESSION_ERROR", 404: "SESSION_ERROR", 410: "SESSION_ERROR", 422: "VALIDATION_ERROR"}
_CODES |= {429: "CAPACITY_REACHED", 503: "CAPACITY_REACHED"}


def _reply(kind: str, data: dict[str, Any]) -> str:
    return orjson.dumps({"type": kind, "data": data}).decode()


def _error(message: str, code: str, status: int | None = None) -> str:
    data: dict[str, Any] = {"message": message, "code": code}
    if status is not None:
        data["status"] = status
    return _reply("error", data)


def _problems(exc: ValidationError) -> str:
    """A validation error's problems, located, without the input (it may be large or secret)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


__all__ = ["router"]
