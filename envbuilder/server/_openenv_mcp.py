"""OpenEnv's MCP route: an episode's tools as JSON-RPC 2.0 ``tools/list`` and ``tools/call``.

openenv-core (0.3) serves MCP beside reset / step / state, and this door answers what its
clients send, as its ``HTTPEnvServer`` answers it:

- ``POST {base}/mcp``, the route ``MCPToolClient`` uses in production mode: ``openenv/session/create``
  (a new episode; its ``session_id`` names it in the later calls), ``tools/list`` and
  ``tools/call`` (``{"name", "arguments", "session_id"}``) and ``openenv/session/close``.
  ``openenv validate --url`` probes it with ``{}``.
- a ``{"type": "mcp", "data": REQUEST}`` message on the ``/ws`` WebSocket, answered
  ``{"type": "mcp", "data": RESPONSE}``, for the connection's episode (the one its last reset
  started).

OpenEnv's server creates an MCP session without a task; an envbuilder episode plays one, so
``openenv/session/create`` takes reset's parameters (``split``, ``index``, ``seed``, ``task``,
``episode_id``, ``secrets``), and without them plays what a reset without them plays (a random
task of the train split). Its result holds the reset's observation beside ``session_id``, so a
client sees the prompt.

A call runs through the door's ``step`` (one implementation of a tool call), so a call's reward
and end are the step's: a ``tools/call`` result is MCP's ``CallToolResult`` (``content``,
``isError``) with ``data`` (the output's text, which ``MCPToolClient.call_tool`` returns) and
``_meta`` (``reward``: null until the call that ends the episode, then the episode's reward,
null when the answer could not be graded; ``done``). Errors are JSON-RPC errors in a 200
answer, as OpenEnv sends them (its client raises on ``error``); ``data.status`` holds the HTTP
status the ORS route would have answered. A call whose tool refused it (bad arguments, a
finished episode) is a result with ``isError``, as MCP reports tool errors, so an agent sees it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envbuilder.errors import RequestRejected
from envbuilder.server import _headers, _openenv, _ops
from envbuilder.server._context import ServerContext
from envbuilder.server._owners import owned

log = logging.getLogger("envbuilder.server")

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, SERVER_ERROR = -32603, -32000
"""JSON-RPC 2.0's error codes (and its range for implementation errors), as OpenEnv uses them."""

_CODES = {400: INVALID_PARAMS, 404: INVALID_PARAMS, 410: INVALID_PARAMS, 422: INVALID_PARAMS}


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (OpenEnv's ``JsonRpcRequest``)."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    method: str = Field(max_length=256)
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


class _CloseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str


class _ListParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str | None = None


class _CallParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=256)
    arguments: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None


def error(
    code: int, message: str, request_id: str | int | None = None, status: int | None = None
) -> dict[str, Any]:
    """A JSON-RPC error response (``data.status``: the HTTP status of the same refusal)."""
    body: dict[str, Any] = {"code": code, "message": message}
    if status is not None:
        body["data"] = {"status": status}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def _success(result: Any, request_id: str | int | None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def parse(raw: Any) -> JsonRpcRequest | dict[str, Any]:
    """The request in ``raw`` (a decoded JSON value), or the error response that refuses it."""
    try:
        return JsonRpcRequest.model_validate(raw)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())
        request_id = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str | int) else None
        return error(INVALID_REQUEST, f"Invalid request: {where}", request_id)


class Episodes:
    """Where a JSON-RPC call finds its episode: the ``session_id`` it names (HTTP), or the
    episode of its WebSocket connection (``bound``)."""

    def __init__(self, state: ServerContext, env_name: str | None, secrets: str | None = None):
        self.state = state
        self.env_name = env_name
        self.secrets = secrets
        self.bound: str | None = None
        self.connection = False

    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.connection and self.bound is not None and not params:
            return {"session_id": self.bound}  # as OpenEnv: the connection's session
        request = _openenv.ResetRequest.model_validate(params)
        sid, payload = await _openenv.reset(self.state, self.env_name, request, self.secrets)
        if self.connection:
            await self.release()
            self.bound = sid
        return {"session_id": sid, **payload}

    async def release(self) -> None:
        if self.bound is not None:
            sid, self.bound = self.bound, None
            await self.state.delete(owned(sid))

    def sid(self, named: str | None) -> str:
        if named is not None:
            return _headers.require_sid(named)
        if self.bound is None:
            hint = "send reset first" if self.connection else "create one with openenv/session/create"
            raise RequestRejected(400, f"no episode: name its session_id ({hint})")
        return self.bound


async def handle(episodes: Episodes, request: JsonRpcRequest) -> dict[str, Any]:
    """The JSON-RPC response to ``request`` (never raises for a bad request)."""
    rid = request.id
    try:
        if request.method == "openenv/session/create":
            return _success(await episodes.create(request.params), rid)
        if request.method == "openenv/session/close":
            sid = _headers.require_sid(_CloseParams.model_validate(request.params).session_id)
            if sid == episodes.bound:
                return error(INVALID_REQUEST, "Cannot close the WebSocket connection's episode over MCP", rid)
            await _ops.session_of(episodes.state, sid)  # 404 for an unknown (or another client's) one
            await episodes.state.delete(owned(sid))
            return _success({"session_id": sid, "closed": True}, rid)
        if request.method == "tools/list":
            named = _ListParams.model_validate(request.params).session_id
            if named is None and episodes.bound is None:  # no episode: the environment's tools
                env = episodes.state.env(episodes.env_name or episodes.state.default)
                tools = env.tools_listing.model_dump(mode="json")["tools"]
            else:
                step = await _openenv.step(episodes.state, episodes.sid(named), _openenv.ListToolsAction())
                tools = step["observation"]["tools"]
            return _success({"tools": [_mcp_tool(t) for t in tools]}, rid)
        if request.method == "tools/call":
            params = _CallParams.model_validate(request.params)
            action = _openenv.CallToolAction(tool_name=params.name, arguments=params.arguments)
            step = await _openenv.step(episodes.state, episodes.sid(params.session_id), action)
            failure = step["observation"].get("error")
            if failure is not None and failure["error_type"] == "tool_not_found":
                return error(INVALID_PARAMS, f"Tool not found: {params.name}", rid, 404)
            return _success(_call_result(step), rid)
        methods = "openenv/session/create, openenv/session/close, tools/list, tools/call"
        return error(
            METHOD_NOT_FOUND, f"Method not found: {request.method!r} (this door answers {methods})", rid
        )
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
        return error(INVALID_PARAMS, f"Invalid params: {where}", rid, 422)
    except RequestRejected as exc:
        return error(_CODES.get(exc.status, SERVER_ERROR), exc.message, rid, exc.status)
    except Exception as exc:  # the server's own bug: never its message (it may hold a secret)
        log.error("unhandled %s in an OpenEnv MCP %s", type(exc).__name__, request.method)
        return error(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})", rid, 500)


def _mcp_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An ORS tool spec as MCP lists a tool (``inputSchema``)."""
    return {
        "name": tool["name"],
        "description": tool.get("description") or "",
        "inputSchema": tool["input_schema"],
    }


def _content(block: dict[str, Any]) -> dict[str, Any]:
    """An ORS content block as MCP content (text and images; other blocks as their JSON text)."""
    if block.get("type") == "text":
        return {"type": "text", "text": block["text"]}
    if block.get("type") == "image":
        return {"type": "image", "data": block["data"], "mimeType": block["mimeType"]}
    return {"type": "text", "text": str(block)}


def _call_result(step: dict[str, Any]) -> dict[str, Any]:
    """MCP's ``CallToolResult`` of a door step, with its ``data``, reward and end."""
    observation = step["observation"]
    meta = {"reward": step["reward"], "done": step["done"]}
    failure = observation.get("error")
    if failure is not None:
        text = failure["message"]
        meta["error_type"] = failure["error_type"]
        return {"content": [{"type": "text", "text": text}], "isError": True, "data": text, "_meta": meta}
    if observation.get("metadata"):
        meta["metadata"] = observation["metadata"]
    content = [_content(b) for b in observation.get("blocks", [])]
    return {"content": content, "isError": False, "data": observation.get("result", ""), "_meta": meta}


__all__ = ["Episodes", "JsonRpcRequest", "error", "handle", "parse"]
