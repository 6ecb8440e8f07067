"""The call registry: replay within the linger, eviction after it, in completion order; the
running calls stopped when the server stops."""

from __future__ import annotations

import asyncio

import pytest

from envbuilder.errors import RequestRejected
from envbuilder.server._calls import SHUTTING_DOWN, CallRegistry
from envbuilder.server._tool_calls import final_frames


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


@pytest.mark.asyncio
async def test_stop_cancels_the_running_calls_and_refuses_new_ones() -> None:
    calls = CallRegistry()
    never = asyncio.Event()

    async def grading() -> bytes:
        await never.wait()
        return b"event: end\r\ndata: {}\r\n\r\n"

    running = calls.start("s\tt1", grading())
    await asyncio.sleep(0)
    assert calls.stop() == [running]
    await asyncio.gather(running, return_exceptions=True)
    assert running.cancelled() and calls.running("s\tt1") is None and calls.replay("s\tt1") is None
    # Its stream ends with an error event: nothing was graded.
    assert final_frames(running) == f"event: error\r\ndata: {SHUTTING_DOWN}\r\n\r\n".encode()
    late = grading()
    with pytest.raises(RequestRejected) as refused:
        calls.start("s\tt2", late)
    assert (refused.value.status, refused.value.message) == (503, SHUTTING_DOWN)
    assert late.cr_frame is None  # closed, never run
