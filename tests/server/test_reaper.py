"""Idle sessions are deleted by the reaper; active ones are kept.

The sessions' clock is a fake one the test moves: which session is idle depends on the requests
made between its steps, never on how fast a loaded machine runs them."""

from __future__ import annotations

import time

import httpx

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._sessions import SessionStore
from tests.servers import serve_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _gone(client: httpx.Client, sid: str) -> bool:
    return client.post("/ping", headers={"X-Session-ID": sid}).status_code == 404


def _wait_rounds(rounds: list[int], more: int) -> None:
    """Until the reaper has run ``more`` more times (a generous deadline: a loaded machine)."""
    target = rounds[0] + more
    deadline = time.monotonic() + 60
    while rounds[0] < target:
        assert time.monotonic() < deadline, "the reaper did not run"
        time.sleep(0.01)


def test_idle_sessions_are_reaped_and_pinged_ones_kept(gsm8k: Environment) -> None:
    settings = ServerSettings(session_timeout=600, reap_interval=0.05)
    app = create_app([gsm8k], settings)
    clock = Clock()
    ctx = app.state.context
    ctx.sessions = SessionStore(ctx.calls, clock)
    rounds = [0]
    reap = ctx.reap

    def counted() -> None:
        reap()
        rounds[0] += 1

    ctx.reap = counted
    with serve_app(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        for sid in ("idle", "busy"):
            r = client.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": 0})
            assert r.status_code == 200
        clock.now += 400  # both idle for less than the timeout: the reaper keeps them
        _wait_rounds(rounds, 2)
        assert len(ctx.sessions) == 2
        assert client.post("/ping", headers={"X-Session-ID": "busy"}).status_code == 200
        clock.now += 400  # "idle": 800 s without a request; "busy": 400 s
        _wait_rounds(rounds, 2)
        assert _gone(client, "idle")
        assert client.get("/gsm8k/prompt", headers={"X-Session-ID": "busy"}).status_code == 200
        assert len(ctx.sessions) == 1
