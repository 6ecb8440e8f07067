"""End to end: both reference ORS clients against ``envbuilder serve`` of the shipped GSM8K."""

from __future__ import annotations

import json
import socket
import threading
import uuid

import httpx
import pytest

from envbuilder.environment import Environment
from tests.processes import wait_healthy


def _gold(gsm8k: Environment, split: str, index: int) -> str:
    return gsm8k.split(split).task(index)["answer"].split("####")[-1].strip()


# -- ors-sdk -------------------------------------------------------------------------------------


@pytest.fixture
def ors_env(gsm8k_url: str):
    from ors.client import ORS

    with ORS(base_url=gsm8k_url) as client:  # keep the client (and its event loop) alive
        yield client.environment("gsm8k")


def test_ors_discovery(ors_env, gsm8k: Environment) -> None:
    assert ors_env.list_splits() == ["train", "test"]
    assert ors_env.num_tasks("train") == 7473
    assert ors_env.num_tasks("test") == 1319
    tools = ors_env.list_tools()
    assert [t.name for t in tools] == ["submit"]
    assert tools[0].input_schema["properties"]["answer"]["type"] == "string"
    openai_tools = ors_env.list_tools(format="openai")
    assert openai_tools[0]["name"] == "submit"
    task = ors_env.get_task("test", 5)
    assert task.task_spec == gsm8k.public(gsm8k.split("test").task(5))  # no gold answer
    assert "answer" not in task.task_spec
    assert len(ors_env.get_task_range("train", 0, 3)) == 3
    assert len(ors_env.list_tasks("test")) == 1319


def test_ors_episode_by_split_index(ors_env, gsm8k: Environment) -> None:
    with ors_env.session(split="train", index=3) as s:
        prompt = s.get_prompt()
        assert gsm8k.split("train").task(3)["question"] in prompt[0].text
        assert [t.name for t in s.list_tools()] == ["submit"]
        out = s.call_tool("submit", {"answer": f"The answer is {_gold(gsm8k, 'train', 3)}."})
        assert out.reward == 1.0 and out.finished is True
        assert out.metadata["outcome"] == "correct"


def test_ors_episode_by_task_wrong_answer(ors_env, gsm8k: Environment) -> None:
    task = ors_env.get_task("test", 0)
    with ors_env.session(task=task) as s:
        out = s.call_tool("submit", {"answer": "-123456"})
        assert out.reward == 0.0 and out.finished is True
        from ors.client import ToolCallError

        with pytest.raises(ToolCallError, match="episode has finished"):
            s.call_tool("submit", {"answer": _gold(gsm8k, "test", 0)})


# -- openreward ----------------------------------------------------------------------------------


@pytest.fixture
def or_envs(gsm8k_url: str, monkeypatch: pytest.MonkeyPatch):
    from openreward import EnvironmentsAPI

    api = EnvironmentsAPI(base_url=gsm8k_url, api_key=None)
    yield api
    close = getattr(api, "close", None)
    if close is not None:
        close()


@pytest.mark.parametrize("variant", ["gsm8k", None])
def test_openreward_discovery(or_envs, variant: str | None, gsm8k: Environment) -> None:
    env = or_envs.get(name="gsm8k", variant=variant)
    assert env.list_splits() == ["train", "test"]
    assert env.num_tasks("test") == 1319
    task = env.get_task("test", -1)
    assert task.task_spec == gsm8k.public(gsm8k.split("test").task(1318))
    assert [t.task_spec["id"] for t in env.get_task_range("train", start=-2)] == ["train-7471", "train-7472"]
    assert [t.name for t in env.list_tools()] == ["submit"]
    assert env.list_tools(format="anthropic")[0]["input_schema"]["required"] == ["answer"]
    assert env.terminal_tool() is None
    assert env.supports_score_group() is False


def test_openreward_episode(or_envs, gsm8k: Environment) -> None:
    from openreward.api.environments.types import ToolCallError

    env = or_envs.get(name="gsm8k", variant="gsm8k")
    with env.session(split="test", index=7) as s:
        msgs = s.get_messages()
        assert len(msgs) == 1 and msgs[0].role == "user"
        assert gsm8k.split("test").task(7)["question"] in msgs[0].blocks[0].text
        assert s.get_messages("openai")[0]["role"] == "user"
        assert s.get_messages("anthropic")["system"] is None
        with pytest.raises(ToolCallError) as info:
            s.call_tool("nope", {})
        assert info.value.reason == "not_found"
        with pytest.raises(ToolCallError) as info:
            s.call_tool("submit", {"wrong": 1})
        assert info.value.reason == "input_validation"
        out = s.call_tool("submit", {"answer": f"**{_gold(gsm8k, 'test', 7)}**"})
        assert (out.reward, out.finished) == (1.0, True)
        with pytest.raises(ToolCallError) as info:
            s.call_tool("submit", {"answer": "1"})
        assert info.value.reason == "episode_finished"


def test_openreward_secrets_header_accepted(or_envs) -> None:
    env = or_envs.get(name="gsm8k", variant="gsm8k")
    with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": "sk-test-not-logged"}) as s:
        out = s.call_tool("submit", {"answer": "72"})
        assert out.reward == 1.0
        assert "sk-test" not in json.dumps(out.metadata)


# -- raw wire: chunking, reconnect, error paths ---------------------------------------------------


def _events(text: str) -> list[tuple[str, str]]:
    out = []
    for block in text.split("\r\n\r\n"):
        if block.startswith("event:"):
            name, data = block.split("\r\n", 1)
            out.append((name[len("event: ") :], data[len("data: ") :]))
    return out


def _session(client: httpx.Client, split: str = "train", index: int = 0) -> str:
    sid = uuid.uuid4().hex
    r = client.post("/create", headers={"X-Session-ID": sid}, json={"split": split, "index": index})
    assert r.status_code == 200, r.text
    return sid


def test_large_result_is_chunked_and_reassembled(gsm8k_url: str) -> None:
    with httpx.Client(base_url=gsm8k_url) as c:
        sid = _session(c)
        long_name = "x " * 3000  # a tool name that is echoed in the error: a >4 KB result
        r = c.post("/gsm8k/call", headers={"X-Session-ID": sid}, json={"name": long_name, "input": {}})
        events = _events(r.text)
        assert [e[0] for e in events] == ["task_id", "chunk", "end"]
        for _, data in events[1:]:
            assert len(data) <= 4096 and not data[:1].isspace()
        result = json.loads("".join(d for _, d in events[1:]))
        assert result["reason"] == "not_found" and long_name in result["error"]


def test_reconnect_by_task_id_replays_result(gsm8k_url: str) -> None:
    with httpx.Client(base_url=gsm8k_url) as c:
        sid = _session(c)
        r = c.post(
            "/gsm8k/call", headers={"X-Session-ID": sid}, json={"name": "submit", "input": {"answer": "72"}}
        )
        (_, task_id), (_, first) = _events(r.text)
        again = c.post(
            "/gsm8k/call",
            headers={"X-Session-ID": sid},
            json={"name": "IGNORED", "input": {}, "task_id": task_id},
        )
        assert _events(again.text) == [("task_id", task_id), ("end", first)]
        unknown = c.post(
            "/gsm8k/call",
            headers={"X-Session-ID": sid},
            json={"name": "x", "input": {}, "task_id": "deadbeef"},
        )
        assert _events(unknown.text) == [("error", "unknown task_id")]


def test_error_paths(gsm8k_url: str) -> None:
    with httpx.Client(base_url=gsm8k_url) as c:
        assert c.post("/create", json={"split": "train", "index": 0}).status_code == 400
        sid = uuid.uuid4().hex
        h = {"X-Session-ID": sid}
        r = c.post("/create", headers=h, json={"split": "train"})
        assert r.status_code == 422
        assert "Provide either task_spec or both split and index" in r.text
        assert c.post("/create", headers=h, json={"split": "nope", "index": 0}).json() == {
            "detail": "Invalid split"
        }
        assert c.post("/create", headers=h, json={"split": "train", "index": 10**6}).json() == {
            "detail": "Invalid index"
        }
        r = c.post("/create", headers=h, json={"env_name": "nosuch", "split": "train", "index": 0})
        assert (r.status_code, r.json()) == (
            404,
            {"detail": "unknown environment 'nosuch'; this server serves: gsm8k"},
        )
        assert c.get("/gsm8k/prompt", headers=h).status_code == 404
        assert c.post("/create", headers=h, json={"split": "train", "index": 0}).status_code == 200
        assert c.post("/create", headers=h, json={"split": "train", "index": 0}).json() == {
            "detail": "Session already exists"
        }
        r = c.post(
            "/create",
            headers={**h, "X-Session-ID": "x2", "X-Secrets": "%%%"},
            json={"split": "train", "index": 0},
        )
        assert r.status_code == 400 and "X-Secrets" in r.json()["detail"]
        assert c.post("/delete", headers=h).json() == {"sid": sid}
        assert c.post("/delete", headers=h).json() == {"sid": sid}
        r = c.post("/gsm8k/call", headers=h, json={"name": "submit", "input": {"answer": "1"}})
        assert (r.status_code, r.json()) == (404, {"detail": "Active environment not found"})
        assert c.get("/health/tools").json() == {
            "detail": "unknown environment 'health'; this server serves: gsm8k"
        }
        r = c.get("/tools?x=1", follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (308, "/gsm8k/tools?x=1")


def test_session_gone_while_call_waits_is_410_or_error(gsm8k_url: str) -> None:
    """A tool call that arrives for a deleted session is refused, never run."""
    with httpx.Client(base_url=gsm8k_url) as c:
        sid = _session(c)
        c.post("/delete", headers={"X-Session-ID": sid})
        r = c.post(
            "/gsm8k/call", headers={"X-Session-ID": sid}, json={"name": "submit", "input": {"answer": "72"}}
        )
        assert r.status_code == 404


def test_health_answers_quickly_after_process_start(tmp_path) -> None:
    """``envbuilder serve`` answers /health and says what it serves (how soon: bench/, where
    timing goals live; a deadline here only failed on a loaded machine)."""
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envbuilder",
            "serve",
            "envs/gsm8k.yaml",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)  # (a generous deadline: a loaded machine)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=120)
    assert "serving gsm8k (train 7,473 / test 1,319 tasks)" in out
    assert f"listening on http://127.0.0.1:{port}" in out


def test_threads_do_not_leak() -> None:
    assert threading.active_count() < 50
