"""End to end: a spec with an LLM judge served by uvicorn; judge calls never block other sessions."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.servers import serve_app

KEY = "sk-e2e-DO-NOT-LEAK-42"
EPISODES = 64
JUDGE_SECONDS = 0.1
# Whether judge calls overlap is read off the judge itself (how many were in flight at once),
# not off a wall clock: a loaded CI box slows every call, yet an implementation that waits for
# one judge call before the next never has two in flight.
MIN_OVERLAP = 8
OVERLAP_WAIT = 30.0


class _InFlight:
    """Judge requests being answered right now, and the most seen at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

        self.overlapped = threading.Event()
        """Set once MIN_OVERLAP requests were in flight together (or once one gave up waiting)."""

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            if self.now >= MIN_OVERLAP:
                self.overlapped.set()

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


IN_FLIGHT = _InFlight()


def slow_judge(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    with IN_FLIGHT:
        # Each call is held until MIN_OVERLAP are in flight together, so a loaded machine that
        # is slow to send them cannot pass for serialised calls; a server that sends one at a
        # time never gets there: the first call gives up after OVERLAP_WAIT and lets all go.
        if not IN_FLIGHT.overlapped.wait(OVERLAP_WAIT):
            IN_FLIGHT.overlapped.set()
        time.sleep(JUDGE_SECONDS)
    return 200, completion("Matches.\nVERDICT: CORRECT"), {}


def _end_event(stream: str) -> dict[str, Any]:
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        if "event: end" in lines:
            return json.loads("".join(line[len("data: ") :] for line in lines if line.startswith("data: ")))
    raise AssertionError(f"no end event in {stream!r}")


async def _create(client: httpx.AsyncClient, index: int) -> None:
    headers = {"X-Session-ID": f"e2e-{index}"}
    body = {"split": "test", "index": index, "secrets": {"JUDGE_KEY": KEY}}
    created = await client.post("/create", headers=headers, json=body)
    assert created.status_code == 200, created.text


async def _submit(client: httpx.AsyncClient, index: int) -> dict[str, Any]:
    headers = {"X-Session-ID": f"e2e-{index}"}
    body = {"name": "submit", "input": {"answer": f"my answer {index}"}}
    called = await client.post("/judged/call", headers=headers, json=body)
    assert called.status_code == 200
    return _end_event(called.text)


def test_64_concurrent_judged_episodes_do_not_serialise(judged: Callable[..., str]) -> None:
    with ChatServer(slow_judge) as judge:
        spec = judged(judge.base_url, api_key_secret="JUDGE_KEY")
        env = Environment(parse_spec(spec, file="judged.yaml", base_dir=ENVS))
        assert env.is_blocking("submit")
        app = create_app([env], ServerSettings(ping_interval=0.2))
        with serve_app(app) as url:

            async def run() -> list[dict[str, Any]]:
                limits = httpx.Limits(max_connections=EPISODES)
                async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
                    # Sessions first (this also opens the connections), then every call at once.
                    await asyncio.gather(*(_create(client, i) for i in range(EPISODES)))
                    results = await asyncio.gather(*(_submit(client, i) for i in range(EPISODES)))
                    return list(results)

            IN_FLIGHT.peak = 0
            IN_FLIGHT.overlapped.clear()
            results = asyncio.run(run())
    assert IN_FLIGHT.peak >= MIN_OVERLAP, IN_FLIGHT.peak
    assert len(judge.requests) == EPISODES
    assert all(r["ok"] and r["output"]["reward"] == 1.0 for r in results)
    assert results[0]["output"]["metadata"]["judge"]["verdict"] == "CORRECT"
    assert {h.get("authorization") for h in judge.headers_seen} == {f"Bearer {KEY}"}
    assert KEY not in json.dumps(results)
    assert env.grade_counts() == {"correct": EPISODES, "incorrect": 0, "ungradeable": 0}
