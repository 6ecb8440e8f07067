"""A session deleted while calls on it run or wait (in process, memory store): no call on it is
saved, none waiting starts, and a saved call keeps the session alive."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._calls import CallRegistry
from envbuilder.server._sessions import SessionRecord, SessionStore
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion


async def test_a_session_deleted_under_its_calls(judged: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def slow(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        release.wait(30)
        return 200, completion("VERDICT: CORRECT"), {}

    monkeypatch.setenv("STORE_CALLS_JUDGE_KEY", "sk-calls")
    with ChatServer(slow) as judge:
        text = judged(
            judge.base_url, reference="{{ answer }}", api_key_env="STORE_CALLS_JUDGE_KEY", cache=False
        )
        app = create_app([Environment(parse_spec(text, file="judged.yaml", base_dir=ENVS))], ServerSettings())
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://t") as c,
        ):
            h = {"X-Session-ID": "s"}
            call = {"name": "submit", "input": {"answer": "18"}}
            assert (await c.post("/create", headers=h, json={"split": "test", "index": 0})).status_code == 200
            first = asyncio.ensure_future(c.post("/judged/call", headers=h, json=call))
            while not judge.requests:  # the first call runs (holds the session's lock)
                await asyncio.sleep(0.02)
            second = asyncio.ensure_future(c.post("/judged/call", headers=h, json=call))
            await asyncio.sleep(0.2)  # (the second waits for the lock)
            assert (await c.post("/delete", headers=h)).status_code == 200
            release.set()
            for reply in (await first, await second):
                assert reply.text.rstrip().endswith("event: error\r\ndata: Session deleted"), reply.text
    assert len(judge.requests) == 1  # the waiting call never ran on the deleted session


async def test_a_saved_session_stays_in_the_reapers_clock() -> None:
    store = SessionStore(CallRegistry(60))
    session = SessionRecord(sid="s", env="gsm8k", episode=Episode(task={"id": "test-0"}), client="key:a")
    assert await store.add(session)
    assert await store.latest(session) is session
    session.last_seen = 0.0
    assert await store.save(session, "call", b"frames", "correct")
    assert store.sweep(60) == []  # the save renewed it
    assert await store.result("call") == b"frames"
    await store.record("failed", b"error-frames")  # a call whose tool raised
    assert await store.result("failed") == b"error-frames"
    assert await store.begin(session.key, "c", "submit", {}) is session and await store.healthy()
    assert store.sweep(-1) == [session]
    assert await store.latest(session) is None
    assert not await store.save(session, "late", b"x", "correct")
    assert await store.result("late") is None
