"""The OpenEnv door's MCP route, end to end against a real uvicorn: openenv-core's own
``MCPToolClient`` in production mode (HTTP ``/mcp``: ``openenv/session/create``, ``tools/list``,
``tools/call``, ``openenv/session/close``) plays tool specs with the rewards of the in-process
episode; the same JSON-RPC in a ``{"type": "mcp"}`` message on the WebSocket; ``openenv
validate``'s runtime check passes; bad requests get JSON-RPC errors naming the problem."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.doors import SECRETS, Play, full_reward, load, model, plays, reference
from tests.fakes.chat_server import ChatServer
from tests.servers import serve_app

pytest.importorskip("openenv.core")
from openenv.core.mcp_client import MCPToolClient

KEY = "m" * 32
TOOL_SPECS = ("gsm8k_tools", "tau2_retail")


@pytest.fixture(scope="module")
def models() -> Iterator[ChatServer]:
    with ChatServer(model) as server:
        yield server


def _serve(envs: list[Any], **settings: Any) -> Any:
    options = ServerSettings(doors=("openenv",), **settings)
    return serve_app(create_app(envs, options), **uvicorn_options(options))


def _expected(path: Path, base_url: str) -> tuple[Play, Play, dict[str, list[tuple[float | None, bool]]]]:
    ref = load(path, base_url)
    gold, wrong = plays(ref)
    loop = asyncio.new_event_loop()
    try:
        expected = {p.label: reference(ref, p, loop) for p in (gold, wrong)}
        loop.run_until_complete(ref.aclose())
    finally:
        loop.close()
    assert expected["gold"][-1] == (full_reward(ref), True) and expected["wrong"][-1] == (0.0, True)
    return gold, wrong, expected


async def _play_production(base: str, play: Play) -> list[tuple[float | None, bool]]:
    """``play`` through MCPToolClient's production mode: each call's (reward, done)."""
    client = MCPToolClient(base_url=base)
    client.use_production_mode = True  # openenv-core 0.3: how a client selects HTTP /mcp
    try:
        # The client's own create sends no parameters (a random train task); the task to play
        # is chosen with reset's parameters, through the client's own JSON-RPC transport.
        created = await client._production_mcp_request(
            "openenv/session/create", {"split": play.split, "index": play.index, "secrets": SECRETS}
        )
        sid = created["result"]["session_id"]
        assert created["result"]["observation"]["messages"], created  # the prompt, as a reset's
        client._production_session_id = sid
        names = {t.name for t in await client.list_tools()}
        assert {name for name, _ in play.calls} <= names
        steps: list[tuple[float | None, bool]] = []
        for name, arguments in play.calls:
            answer = await client._production_mcp_request(
                "tools/call", {"name": name, "arguments": arguments, "session_id": sid}
            )
            result = answer["result"]
            assert result["data"] == "".join(c["text"] for c in result["content"] if c["type"] == "text")
            steps.append((result["_meta"]["reward"], result["_meta"]["done"]))
            if result["_meta"]["done"]:
                break
    finally:
        await client.close()  # openenv/session/close: the episode is deleted
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{base}/state", params={"episode_id": sid})).status_code == 404
    return steps


@pytest.mark.parametrize("name", TOOL_SPECS)
def test_mcp_tool_client_in_production_mode_plays_tool_specs(name: str, models: ChatServer) -> None:
    gold, wrong, expected = _expected(ENVS / f"{name}.yaml", models.base_url)
    with _serve([load(ENVS / f"{name}.yaml", models.base_url)]) as url:
        for play in (gold, wrong):
            steps = asyncio.run(_play_production(f"{url}/openenv", play))
            assert steps == expected[play.label], play.label
            rewards = [r for r, _ in steps if r is not None]
            assert math.fsum(rewards) == rewards[-1] == steps[-1][0]  # the one reward convention


def test_call_tool_returns_the_output_text(models: ChatServer) -> None:
    env = load(ENVS / "gsm8k_tools.yaml", models.base_url)

    async def run(base: str) -> None:
        client = MCPToolClient(base_url=base)
        client.use_production_mode = True
        try:  # the client's own create: a random train task
            assert await client.call_tool("calculator", expression="6*7") == "42"
            assert {t.name for t in await client.list_tools()} >= {"calculator", "submit"}
            with pytest.raises(RuntimeError, match="Tool not found: fly"):
                await client.call_tool("fly")
        finally:
            await client.close()

    with _serve([env]) as url:
        asyncio.run(run(f"{url}/openenv"))


def test_mcp_messages_on_the_websocket_play_the_connections_episode(models: ChatServer) -> None:
    from websockets.sync.client import connect

    gold, _, expected = _expected(ENVS / "gsm8k_tools.yaml", models.base_url)
    served = load(ENVS / "gsm8k_tools.yaml", models.base_url)
    with _serve([served]) as url, connect(url.replace("http://", "ws://") + "/openenv/ws") as ws:

        def rpc(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
            request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            ws.send(orjson.dumps({"type": "mcp", "data": request}).decode())
            answer = orjson.loads(ws.recv())
            assert answer["type"] == "mcp" and answer["data"]["id"] == rid, answer
            return answer["data"]

        refused = rpc("tools/call", {"name": "submit", "arguments": {"answer": "1"}}, 1)
        assert (
            "no episode" in refused["error"]["message"] and "send reset first" in refused["error"]["message"]
        )
        ws.send(orjson.dumps({"type": "reset", "data": {"split": gold.split, "index": gold.index}}).decode())
        sid = orjson.loads(ws.recv())["data"]["observation"]["episode_id"]
        assert rpc("openenv/session/create", {}, 2)["result"] == {"session_id": sid}
        assert "submit" in [t["name"] for t in rpc("tools/list", {}, 3)["result"]["tools"]]
        steps = []
        for i, (name, arguments) in enumerate(gold.calls):
            meta = rpc("tools/call", {"name": name, "arguments": arguments}, 10 + i)["result"]["_meta"]
            steps.append((meta["reward"], meta["done"]))
        assert steps == expected["gold"]
        closing = rpc("openenv/session/close", {"session_id": sid}, 4)
        assert closing["error"]["code"] == -32600  # the connection's own episode ends with it


def test_openenv_validate_passes_on_the_door(models: ChatServer) -> None:
    from openenv.cli._validation import validate_running_environment

    with _serve([load(ENVS / "gsm8k.yaml", models.base_url)]) as url:
        for base in (f"{url}/openenv", f"{url}/openenv/gsm8k"):
            report = validate_running_environment(base)
            failed = [c for c in report["criteria"] if not c["passed"]]
            assert report["passed"], failed
            assert report["mode"] == "simulation"


@pytest.fixture(scope="module")
def keyed_url(models: ChatServer) -> Iterator[str]:
    with _serve([load(ENVS / "gsm8k_tools.yaml", models.base_url)], api_keys=(KEY, "o" * 32)) as url:
        yield url


def _rpc(url: str, body: Any, key: str = KEY, raw: bytes | None = None) -> dict[str, Any]:
    headers = {"X-API-Key": key, "content-type": "application/json"}
    content = raw if raw is not None else orjson.dumps(body)
    response = httpx.post(f"{url}/openenv/mcp", content=content, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _call(method: str, params: Any = None, rid: int = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        **({"params": params} if params is not None else {}),
    }


@pytest.mark.parametrize(
    ("body", "code", "message", "status"),
    [
        ({}, -32600, "Invalid request: jsonrpc: Field required", None),
        ([1], -32600, "Invalid request", None),
        ({"jsonrpc": "1.0", "method": "tools/list", "id": 3}, -32600, "jsonrpc", None),
        (_call("resources/list"), -32601, "Method not found: 'resources/list'", None),
        (_call("tools/call", {"name": "submit"}), -32602, "create one with openenv/session/create", 400),
        (_call("tools/call", {"name": "submit", "session_id": "nope"}), -32602, "not found", 404),
        (_call("tools/call", {"name": "submit", "arguments": [1]}), -32602, "arguments", 422),
        (_call("tools/call", {"arguments": {}}), -32602, "name: Field required", 422),
        (_call("openenv/session/create", {"split": "nope"}), -32602, "Invalid split", 400),
        (_call("openenv/session/create", {"colour": "red"}), -32602, "colour", 422),
        (_call("openenv/session/close", {}), -32602, "session_id", 422),
        (_call("openenv/session/close", {"session_id": "nope"}), -32602, "not found", 404),
    ],
)
def test_bad_requests_get_a_jsonrpc_error_naming_the_problem(
    keyed_url: str, body: Any, code: int, message: str, status: int | None
) -> None:
    answer = _rpc(keyed_url, body)
    assert answer["jsonrpc"] == "2.0" and "result" not in answer
    assert answer["error"]["code"] == code and message in answer["error"]["message"], answer
    assert answer["error"].get("data", {}).get("status") == status
    assert answer["id"] == (body.get("id") if isinstance(body, dict) else None)


def test_the_mcp_route_keeps_the_doors_rules(keyed_url: str) -> None:
    assert _rpc(keyed_url, None, raw=b"{not json")["error"]["code"] == -32700
    assert httpx.post(f"{keyed_url}/openenv/mcp", json=_call("tools/list")).status_code == 401
    assert httpx.post(f"{keyed_url}/openenv/nope/mcp", json={}, headers={"X-API-Key": KEY}).status_code == 404
    # Without a session, tools/list lists the environment's tools; another client's episode is not found.
    listed = _rpc(keyed_url, _call("tools/list"))["result"]["tools"]
    assert {t["name"] for t in listed} >= {"calculator", "submit"} and "inputSchema" in listed[0]
    sid = _rpc(keyed_url, _call("openenv/session/create"))["result"]["session_id"]
    theirs = _rpc(keyed_url, _call("tools/call", {"name": "calculator", "session_id": sid}), key="o" * 32)
    assert theirs["error"]["data"]["status"] == 404
    bad = _rpc(
        keyed_url, _call("tools/call", {"name": "calculator", "arguments": {"x": 1}, "session_id": sid})
    )
    assert bad["result"]["isError"] is True and bad["result"]["_meta"]["error_type"] == "invalid_args"
    closed = _rpc(keyed_url, _call("openenv/session/close", {"session_id": sid}))
    assert closed["result"] == {"session_id": sid, "closed": True}


def test_the_door_refuses_a_tool_named_like_openenvs_controls(models: ChatServer) -> None:
    from envbuilder.environment import Environment
    from envbuilder.errors import EnvbuilderError
    from envbuilder.server import check_doors
    from envbuilder.spec import parse_spec

    text = (ENVS / "gsm8k_tools.yaml").read_text().replace("name: hint", "name: reset")
    clash = Environment(parse_spec(text, file="gsm8k_tools.yaml", base_dir=ENVS))
    with pytest.raises(EnvbuilderError) as refused:
        check_doors(["openenv"], [clash])
    assert refused.value.code == "door_refuses"
    assert "gsm8k-tools: its tool 'reset' has a name OpenEnv keeps for its own controls" in str(refused.value)
    assert check_doors(["openenv"], [load(ENVS / "gsm8k_tools.yaml", models.base_url)])
