"""The OpenEnv door, end to end: the real ``openenv-core`` clients (``GenericEnvClient`` and
``MCPToolClient``, over its WebSocket) and plain HTTP against a real uvicorn, on every shipped
spec: the gold play gets the full reward, a wrong one 0, each step's reward and end are the
in-process episode's, and the rewards keep the one convention."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.doors import FIVE, SECRETS, SPECS, Play, full_reward, load, model, plays, reference
from tests.fakes.chat_server import ChatServer
from tests.servers import serve_app

openenv = pytest.importorskip("openenv.core")
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from openenv.core.mcp_client import MCPToolClient  # noqa: E402

KEY = "k" * 32


@pytest.fixture(scope="module")
def models() -> Iterator[ChatServer]:
    with ChatServer(model) as server:
        yield server


def _serve(envs: list[Any], **settings: Any) -> Any:
    options = ServerSettings(doors=("openenv",), **settings)
    return serve_app(create_app(envs, options), **uvicorn_options(options))


def _play(base: str, play: Play, **reset: Any) -> list[tuple[float | None, bool, dict[str, Any]]]:
    """``play`` through OpenEnv's GenericEnvClient: each step's (reward, done, observation)."""
    steps = []
    with GenericEnvClient(base_url=base).sync() as env:
        first = env.reset(split=play.split, index=play.index, secrets=SECRETS, **reset)
        assert first.done is False and first.reward is None
        assert first.observation["messages"] and first.observation["tools"]
        for name, arguments in play.calls:
            result = env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
            steps.append((result.reward, result.done, result.observation))
            if result.done:
                break
        state = env.state()
        assert state["episode_id"] == first.observation["episode_id"]
        assert state["step_count"] == len(steps) and state["done"] == steps[-1][1]
    return steps


def _convention(steps: list[tuple[float | None, bool, dict[str, Any]]]) -> float | None:
    """The episode's reward, checked: the sum of step rewards = the last non-null one = it."""
    rewards = [r for r, _, _ in steps]
    non_null = [r for r in rewards if r is not None]
    final = steps[-1][0] if steps[-1][1] else None
    assert all(r is None for r, done, _ in steps if not done)
    assert (math.fsum(non_null) if non_null else None) == (non_null[-1] if non_null else None) == final
    return final


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_openenv_client_plays_every_shipped_spec(path: Path, models: ChatServer) -> None:
    served, ref = load(path, models.base_url), load(path, models.base_url)
    gold, wrong = plays(ref)
    loop = asyncio.new_event_loop()
    try:
        expected = {p.label: reference(ref, p, loop) for p in (gold, wrong)}
        loop.run_until_complete(ref.aclose())
    finally:
        loop.close()
    with _serve([served]) as url:
        for play in (gold, wrong):
            steps = _play(f"{url}/openenv", play)
            assert [(r, d) for r, d, _ in steps] == expected[play.label], play.label
            final = _convention(steps)
            if path.stem in FIVE:  # the five every door must play with the right rewards
                assert steps[-1][1], f"{play.label} play did not end the episode"
                assert final == (full_reward(ref) if play.label == "gold" else 0.0), play.label


def test_mcp_tool_client_lists_and_calls_tools(models: ChatServer) -> None:
    env = load(Path("envs/gsm8k_tools.yaml").resolve(), models.base_url)
    gold, _ = plays(env)

    async def run(base: str) -> None:
        async with MCPToolClient(base_url=base) as client:
            await client.reset(split=gold.split, index=gold.index)
            tools = await client.list_tools()
            assert {t.name for t in tools} >= {"calculator", "submit"}
            assert all(t.input_schema.get("type") == "object" for t in tools)
            result = await client.step(_call("calculator", {"expression": "6*7"}))
            assert result.observation.result == "42" and result.reward is None and not result.done
            answer = gold.calls[-1][1]
            result = await client.step(_call("submit", answer))
            assert result.done and result.reward == 1.0

    with _serve([env]) as url:
        asyncio.run(run(f"{url}/openenv"))


def _call(name: str, arguments: dict[str, Any]) -> Any:
    from openenv.core.env_server.mcp_types import CallToolAction

    return CallToolAction(tool_name=name, arguments=arguments)


@pytest.fixture(scope="module")
def gsm8k_url(models: ChatServer) -> Iterator[str]:
    envs = [load(Path("envs/gsm8k.yaml").resolve(), models.base_url)]
    with _serve(envs, api_keys=(KEY,)) as url:
        yield url


def _headers() -> dict[str, str]:
    return {"X-API-Key": KEY}


def test_http_reset_step_state_name_the_episode(gsm8k_url: str) -> None:
    with httpx.Client(base_url=f"{gsm8k_url}/openenv", headers=_headers()) as http:
        reset = http.post("/reset", json={"seed": 3}).json()
        obs = reset["observation"]
        assert reset["reward"] is None and reset["done"] is False
        assert obs["split"] == "train" and obs["index"] == 3 and obs["answer_tool"] == "submit"
        sid = obs["episode_id"]
        # The same session over ORS: the prompt the door showed is the ORS one.
        messages = http.get(f"{gsm8k_url}/gsm8k/messages", headers={"X-Session-ID": sid}).json()
        assert obs["prompt_messages"] == messages
        step = http.post("/step", json={"episode_id": sid, "action": {"type": "list_tools"}}).json()
        assert [t["name"] for t in step["observation"]["tools"]] == ["submit"]
        action = {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "-1"}}
        step = http.post("/step", json={"episode_id": sid, "action": action}).json()
        assert step["done"] is True and step["reward"] == 0.0
        state = http.get("/state", params={"episode_id": sid}).json()
        assert state == {
            "episode_id": sid,
            "step_count": 1,
            "env_name": "gsm8k",
            "task_id": obs["task_id"],
            "done": True,
            "attempts": 1,
        }
        # Finished: another answer is refused, and says why.
        again = http.post("/step", json={"episode_id": sid, "action": action}).json()
        assert again["observation"]["error"]["error_type"] == "episode_finished" and again["done"] is True


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [
        ("post", "/step", {"action": {"type": "list_tools"}}, 400, "episode_id"),
        ("post", "/step", {"episode_id": "nope", "action": {"type": "list_tools"}}, 404, "not found"),
        ("post", "/step", {"episode_id": "x", "action": {"type": "fly"}}, 422, "action"),
        ("post", "/step", {"episode_id": "x", "action": {}, "speed": 9}, 422, "speed"),
        ("post", "/step", {"episode_id": "x"}, 422, "action"),
        ("post", "/reset", {"split": "nope"}, 400, "Invalid split"),
        ("post", "/reset", {"index": 10**9}, 400, "Invalid index"),
        ("post", "/reset", {"seed": -1}, 422, "seed"),
        ("post", "/reset", {"colour": "red"}, 422, "colour"),
        ("post", "/reset", {"env_name": "nope"}, 404, "unknown environment"),
        ("get", "/state", None, 400, "episode_id"),
        ("post", "/nope/reset", {}, 404, "unknown environment"),
    ],
)
def test_bad_requests_get_a_4xx_with_detail(
    gsm8k_url: str, method: str, path: str, body: Any, status: int, detail: str
) -> None:
    with httpx.Client(base_url=f"{gsm8k_url}/openenv", headers=_headers()) as http:
        response = http.request(method.upper(), path, json=body)
    assert response.status_code == status, response.text
    assert detail in str(response.json()["detail"])


def test_api_keys_are_honoured_over_http_and_the_websocket(gsm8k_url: str) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    assert httpx.post(f"{gsm8k_url}/openenv/reset", json={}).status_code == 401
    ws_url = gsm8k_url.replace("http://", "ws://") + "/openenv/ws"
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url)
    assert refused.value.response.status_code == 401
    assert b"API key" in refused.value.response.body
    with connect(ws_url, additional_headers=_headers()) as ws:
        ws.send('{"type": "reset", "data": {"seed": 1}}')
        assert '"type":"observation"' in ws.recv()


def test_websocket_errors_keep_the_connection(gsm8k_url: str) -> None:
    import orjson
    from websockets.sync.client import connect

    ws_url = gsm8k_url.replace("http://", "ws://") + "/openenv/ws"
    with connect(ws_url, additional_headers=_headers()) as ws:
        for message, code in [
            ("not json", "INVALID_JSON"),
            ('{"type": "dance"}', "UNKNOWN_TYPE"),
            ('{"type": "step", "data": {"type": "list_tools"}}', "SESSION_ERROR"),
            ('{"type": "reset", "data": {"seed": "x"}}', "VALIDATION_ERROR"),
            ('{"type": "reset", "data": {"split": "nope"}}', "SESSION_ERROR"),
        ]:
            ws.send(message)
            answer = orjson.loads(ws.recv())
            assert answer["type"] == "error" and answer["data"]["code"] == code, (message, answer)
        ws.send('{"type": "reset", "data": {"seed": 2}}')
        assert orjson.loads(ws.recv())["type"] == "observation"
        ws.send('{"type": "close"}')


def test_an_episode_ends_with_its_websocket_or_an_ors_delete(gsm8k_url: str) -> None:
    import orjson
    from websockets.sync.client import connect

    ws_url = gsm8k_url.replace("http://", "ws://") + "/openenv/ws"
    with httpx.Client(base_url=f"{gsm8k_url}/openenv", headers=_headers()) as http:
        with connect(ws_url, additional_headers=_headers()) as ws:
            ws.send('{"type": "reset", "data": {}}')
            sid = orjson.loads(ws.recv())["data"]["observation"]["episode_id"]
            assert http.get("/state", params={"episode_id": sid}).status_code == 200
        assert _eventually_gone(http, sid)
        sid = http.post("/reset", json={}).json()["observation"]["episode_id"]
        assert http.post(f"{gsm8k_url}/delete", headers={"X-Session-ID": sid}).status_code == 200
        assert http.get("/state", params={"episode_id": sid}).status_code == 404


def _eventually_gone(http: httpx.Client, sid: str) -> bool:
    """Whether the episode is deleted once the server has seen its connection close."""
    for _ in range(500):
        if http.get("/state", params={"episode_id": sid}).status_code == 404:
            return True
        threading.Event().wait(0.01)
    return False


def test_another_clients_episode_is_not_found(models: ChatServer) -> None:
    other = "o" * 32
    envs = [load(Path("envs/gsm8k.yaml").resolve(), models.base_url)]
    with _serve(envs, api_keys=(KEY, other)) as url:
        mine = httpx.post(f"{url}/openenv/reset", json={}, headers=_headers()).json()["observation"][
            "episode_id"
        ]
        theirs = httpx.get(f"{url}/openenv/state", params={"episode_id": mine}, headers={"X-API-Key": other})
        assert theirs.status_code == 404


def test_sessions_live_in_the_shared_store(models: ChatServer, redis_url: str) -> None:
    """Two servers on one Redis: an episode reset on one is stepped on the other."""
    envs = [[load(Path("envs/gsm8k.yaml").resolve(), models.base_url)] for _ in range(2)]
    with _serve(envs[0], store=redis_url) as one, _serve(envs[1], store=redis_url) as two:
        sid = httpx.post(f"{one}/openenv/reset", json={"seed": 5}).json()["observation"]["episode_id"]
        action = {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "-1"}}
        step = httpx.post(f"{two}/openenv/step", json={"episode_id": sid, "action": action}).json()
        assert step["done"] is True and step["reward"] == 0.0
        assert httpx.get(f"{one}/openenv/state", params={"episode_id": sid}).json()["done"] is True


def test_schema_and_metadata(gsm8k_url: str) -> None:
    with httpx.Client(base_url=f"{gsm8k_url}/openenv", headers=_headers()) as http:
        schema = http.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert {"CallToolAction", "ListToolsAction"} <= set(schema["action"]["$defs"])
        assert http.get("/metadata").json()["name"] == "gsm8k"
        assert http.get("/gsm8k/metadata").json()["name"] == "gsm8k"
        assert http.get("/health").json() == {"status": "healthy"}


def test_websocket_messages_and_idle_connections_are_bounded(models: ChatServer) -> None:
    """A message over --max-body-bytes closes its connection (1009), one that sends nothing for
    the session timeout is closed; neither touches another connection's episode."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    envs = [load(Path("envs/gsm8k.yaml").resolve(), models.base_url)]
    with _serve(envs, max_body_bytes=4096, session_timeout=1.0) as url:
        ws_url = url.replace("http://", "ws://") + "/openenv/ws"
        with connect(ws_url) as calm, connect(ws_url) as big:
            calm.send('{"type": "reset", "data": {"seed": 1}}')
            assert '"observation"' in calm.recv()
            big.send('{"type": "reset", "data": {"episode_id": "' + "x" * 8000 + '"}}')
            with pytest.raises(ConnectionClosed) as closed:
                big.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
            calm.send('{"type": "state"}')
            assert '"type":"state"' in calm.recv()
            with pytest.raises(ConnectionClosed) as idle:  # then nothing for the session timeout
                calm.recv(timeout=30)
            assert idle.value.rcvd is not None and idle.value.rcvd.code == 1000
