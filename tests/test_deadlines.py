"""The watchdog stops overrunning Python code in its own thread; offloaded work keeps the loop free."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from envbuilder import deadlines
from tests.loop import ticking


def _spin() -> None:
    while True:
        pass


def test_deadline_stops_a_python_loop_and_the_thread_carries_on() -> None:
    started = time.monotonic()
    with pytest.raises(deadlines.Overrun), deadlines.deadline(0.1):
        _spin()
    assert time.monotonic() - started < 2
    with deadlines.deadline(5):  # finished in time: nothing is raised later
        total = sum(range(1000))
    time.sleep(0.05)
    assert total == 499500


def test_a_block_that_fails_is_unregistered() -> None:
    with pytest.raises(KeyError), deadlines.deadline(0.1):
        raise KeyError("x")
    time.sleep(0.3)  # past the deadline: the watchdog must not fire into this thread now
    assert sum(range(100_000)) == 4999950000


def _fail() -> None:
    raise ValueError("bad")


def test_offload_runs_off_the_loop_and_hands_back_results_and_errors() -> None:
    async def main() -> tuple[int, str, bool]:
        loop_thread = threading.get_ident()
        worker = await deadlines.offload(threading.get_ident)
        async with ticking() as ticks:
            result = await deadlines.offload(lambda: (time.sleep(0.3), 42)[1])
        with pytest.raises(ValueError, match="bad"):
            await deadlines.offload(_fail)
        return result, str(ticks[0] > 10), worker != loop_thread

    result, ticked, elsewhere = asyncio.run(main())
    assert result == 42 and ticked == "True" and elsewhere


def test_an_overrun_in_a_worker_is_a_timeout_for_the_caller() -> None:
    def slow() -> None:
        with deadlines.deadline(0.1):
            _spin()

    async def main() -> None:
        with pytest.raises(TimeoutError, match="the work ran out of time"):
            await deadlines.offload(slow)

    asyncio.run(main())


def test_offloaded_work_runs_for_the_caller_s_party() -> None:
    async def main() -> object:
        with deadlines.party("session-1"):
            return await deadlines.offload(deadlines.current_party)

    assert asyncio.run(main()) == "session-1"
