"""The call registry: replay within the linger, eviction after it, in completion order."""

from __future__ import annotations

from envbuilder.server._calls import CallRegistry


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_replay_then_evict() -> None:
    clock = Clock()
    calls = CallRegistry(linger=50.0, clock=clock)
    calls.finished("a", b"A")
    clock.now += 30
    calls.finished("b", b"B")
    assert calls.lookup("a") == b"A" and calls.lookup("b") == b"B"
    clock.now += 20  # a is exactly at the linger: still replayed
    assert calls.lookup("a") == b"A"
    clock.now += 1
    assert calls.lookup("a") is None  # past the linger, even before evict()
    calls.evict()
    assert calls.lookup("a") is None and calls.lookup("b") == b"B"
    clock.now += 30
    calls.evict()
    assert calls.lookup("b") is None and calls.lookup("unknown") is None
