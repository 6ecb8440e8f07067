"""Idle sessions are deleted by the reaper; active ones are kept (a short timeout here)."""

from __future__ import annotations

import time

import httpx

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from tests.servers import serve_app


def test_idle_sessions_are_reaped_and_pinged_ones_kept(gsm8k: Environment) -> None:
    settings = ServerSettings(session_timeout=0.6, reap_interval=0.1)
    with serve_app(create_app([gsm8k], settings)) as url, httpx.Client(base_url=url) as client:
        for sid in ("idle", "busy"):
            r = client.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": 0})
            assert r.status_code == 200
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            assert client.post("/ping", headers={"X-Session-ID": "busy"}).status_code == 200
            time.sleep(0.1)
        assert client.post("/ping", headers={"X-Session-ID": "idle"}).json() == {
            "detail": "Active environment not found"
        }
        assert client.get("/gsm8k/prompt", headers={"X-Session-ID": "busy"}).status_code == 200
