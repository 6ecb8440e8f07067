"""The in-memory store keeps its sessions in the order they were last seen, so the reaper's
sweep takes the expired ones from the front and stops at the first live one."""

from __future__ import annotations

import pytest

from envbuilder.episode import Episode
from envbuilder.server._calls import CallRegistry
from envbuilder.server._sessions import SessionRecord, SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _session(sid: str) -> SessionRecord:
    return SessionRecord(sid=sid, env="gsm8k", episode=Episode(task={"id": "test-0"}), client="key:a")


@pytest.mark.asyncio
async def test_a_renewed_session_outlives_the_ones_opened_after_it() -> None:
    clock = Clock()
    store = SessionStore(CallRegistry(60), clock)
    sessions = [_session(f"s{i}") for i in range(6)]
    for i, session in enumerate(sessions):
        clock.now = float(i)
        assert await store.add(session)
    clock.now = 6.0
    assert await store.get(sessions[0].key) is sessions[0]  # renewed by a read
    clock.now = 7.0
    assert await store.save(sessions[1], "call", b"", None)  # and by a saved call
    clock.now = 10.5
    # Idle more than 7 s: s2 (seen at 2) and s3 (at 3), not s0 and s1 (renewed), nor s4, s5.
    assert store.idle(7) == [sessions[2].key, sessions[3].key]
    assert [s.sid for s in store.sweep(7)] == ["s2", "s3"]
    assert len(store) == 4 and store.sweep(7) == []
    clock.now = 100.0
    assert [s.sid for s in store.sweep(7)] == ["s4", "s5", "s0", "s1"]  # longest idle first
    assert len(store) == 0 and store.sweep(7) == []


@pytest.mark.asyncio
async def test_a_deleted_session_is_not_swept() -> None:
    clock = Clock()
    store = SessionStore(CallRegistry(60), clock)
    a, b = _session("a"), _session("b")
    assert await store.add(a) and await store.add(b)
    await store.delete(a.key)
    clock.now = 1000.0
    assert store.sweep(60) == [b]
