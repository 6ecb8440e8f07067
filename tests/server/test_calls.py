"""The call registry: replay within the linger, eviction after it, in completion order."""

from __future__ import annotations

import time

from envbuilder.server._calls import CallRegistry


def test_replay_then_evict() -> None:
    calls = CallRegistry(linger=0.05)
    calls.finished("a", b"A")
    time.sleep(0.03)
    calls.finished("b", b"B")
    assert calls.lookup("a") == b"A" and calls.lookup("b") == b"B"
    time.sleep(0.03)
    calls.evict()
    assert calls.lookup("a") is None and calls.lookup("b") == b"B"
    time.sleep(0.05)
    calls.evict()
    assert calls.lookup("b") is None and calls.lookup("unknown") is None
