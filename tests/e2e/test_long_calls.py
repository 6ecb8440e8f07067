"""A tool call that waits on I/O (a slow judge): keep-alive pings, re-attaching by ``task_id``
after a dropped connection, replay within the linger, and a call outliving its session."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.servers import serve_app

JUDGE_SECONDS = 1.0


def _slow(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    time.sleep(JUDGE_SECONDS)
    return 200, completion("VERDICT: CORRECT"), {}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, judged: Callable[..., str]) -> Iterator[tuple[str, ChatServer]]:
    monkeypatch.setenv("LONG_CALLS_JUDGE_KEY", "sk-long")
    with ChatServer(_slow) as judge:
        spec = judged(
            judge.base_url, reference="{{ answer }}", api_key_env="LONG_CALLS_JUDGE_KEY", cache=False
        )
        env = Environment(parse_spec(spec, file="judged.yaml", base_dir=ENVS))
        with serve_app(create_app([env], ServerSettings(ping_interval=0.2))) as url:
            yield url, judge


def _session(client: httpx.Client) -> dict[str, str]:
    h = {"X-Session-ID": f"s-{time.monotonic_ns()}"}
    assert client.post("/create", headers=h, json={"split": "test", "index": 0}).status_code == 200
    return h


def _first_task_id(client: httpx.Client, h: dict[str, str]) -> str:
    """Start the call, read only its ``task_id`` event, then drop the connection."""
    body = {"name": "submit", "input": {"answer": "18"}}
    with client.stream("POST", "/judged/call", headers=h, json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                return line[len("data: ") :]
    raise AssertionError("no task_id event")


def test_reattach_after_a_dropped_connection_gets_pings_then_the_result(served) -> None:
    url, judge = served
    with httpx.Client(base_url=url, timeout=10) as client:
        h = _session(client)
        task_id = _first_task_id(client, h)
        again = client.post(
            "/judged/call", headers=h, json={"name": "IGNORED", "input": {}, "task_id": task_id}
        )
        text = again.text
        assert text.startswith(f"event: task_id\r\ndata: {task_id}\r\n\r\n")
        assert ": ping - " in text  # the judge takes 1 s; keep-alives every 0.2 s
        end = text.split("event: end\r\ndata: ", 1)[1].split("\r\n", 1)[0]
        result = json.loads(end)
        assert result["ok"] and result["output"]["reward"] == 1.0
        replay = client.post("/judged/call", headers=h, json={"name": "x", "input": {}, "task_id": task_id})
        assert replay.text == f"event: task_id\r\ndata: {task_id}\r\n\r\nevent: end\r\ndata: {end}\r\n\r\n"
    assert len(judge.requests) == 1  # the tool ran once, whatever the connections did


def test_a_deleted_session_cannot_reattach(served) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=10) as client:
        h = _session(client)
        task_id = _first_task_id(client, h)
        assert client.post("/delete", headers=h).status_code == 200
        r = client.post("/judged/call", headers=h, json={"name": "x", "input": {}, "task_id": task_id})
        assert (r.status_code, r.json()) == (404, {"detail": "Active environment not found"})
