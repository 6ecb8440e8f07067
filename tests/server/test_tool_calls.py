"""A call of a tool that may wait (the math grader) is answered whole when it ended in its
first step, and streamed when it waits (``_tool_calls.call``); a call re-attached to or
followed on a shared store is found when it ends while it is looked up."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from envbuilder.environment import load_environment
from envbuilder.server import ServerSettings, _tool_calls, create_app
from envbuilder.server._calls import CallRegistry
from tests.conftest import ENVS
from tests.servers import serve_app


@pytest.fixture(scope="module")
def math500() -> Iterator[str]:
    env = load_environment(ENVS / "math500.yaml")
    assert env.is_blocking("submit")  # the calls below are of a tool that may wait
    with serve_app(create_app([env], ServerSettings(ping_interval=0.2))) as url:
        yield url


def _submit(client: httpx.Client, answer: str, index: int = 8) -> httpx.Response:
    """``answer`` to test[8] (3\\sqrt{13}), or to test[``index``]."""
    h = {"X-Session-ID": f"s-{time.monotonic_ns()}"}
    assert client.post("/create", headers=h, json={"split": "test", "index": index}).status_code == 200
    return client.post("/math500/call", headers=h, json={"name": "submit", "input": {"answer": answer}})


def _events(body: str) -> list[tuple[str, str]]:
    out = []
    for frame in body.split("\r\n\r\n"):
        lines = frame.split("\r\n")
        if lines[0].startswith("event: "):
            out.append((lines[0][len("event: ") :], lines[1][len("data: ") :]))
    return out


def _reward(events: list[tuple[str, str]]) -> Any:
    name, data = events[-1]
    assert name == "end", events
    return json.loads(data)["output"]["reward"]


def test_an_answer_decided_at_once_is_one_whole_reply(math500: str) -> None:
    with httpx.Client(base_url=math500, timeout=30) as client:
        # The target's own text; plain numbers against a plain number (test[3]: 9)
        for answer, index, reward in (("3\\sqrt{13}", 8, 1.0), ("9.0", 3, 1.0), ("8", 3, 0.0)):
            r = _submit(client, answer, index)
            assert r.status_code == 200
            assert r.headers["content-length"] == str(len(r.content))  # not chunked: one body
            assert "transfer-encoding" not in r.headers
            events = _events(r.text)
            assert [name for name, _ in events] == ["task_id", "end"]
            assert ": ping" not in r.text
            assert _reward(events) == reward


def test_an_answer_that_waits_for_the_checker_still_streams(math500: str) -> None:
    with httpx.Client(base_url=math500, timeout=60) as client:
        r = _submit(client, "\\boxed{\\sqrt{117}}")  # needs SymPy: a checker process
        assert r.status_code == 200
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
        events = _events(r.text)
        assert events[0][0] == "task_id" and _reward(events) == 1.0


class _EndsBetweenLooks:
    """A shared store on which a call on another worker ends between the look at its result
    and the look at its lease: the first ``result`` finds nothing, ``pending`` no lease."""

    shared = True
    FRAMES = b"event: end\r\ndata: {}\r\n\r\n"

    def __init__(self) -> None:
        self.looks = 0

    async def result(self, call: str) -> bytes | None:
        self.looks += 1
        return None if self.looks == 1 else self.FRAMES

    async def pending(self, call: str) -> None:
        return None


async def test_a_call_that_ends_while_it_is_looked_up_is_found_not_unknown() -> None:
    store = _EndsBetweenLooks()
    ctx: Any = SimpleNamespace(calls=CallRegistry(), sessions=store)
    assert await _tool_calls._reattach(ctx, "k\tt") == store.FRAMES


async def test_a_followed_call_that_ends_between_polls_gives_its_result() -> None:
    store = _EndsBetweenLooks()
    ctx: Any = SimpleNamespace(calls=CallRegistry(), sessions=store)
    assert await _tool_calls._follow(ctx, "k\tt", SimpleNamespace(ours=False)) == store.FRAMES
