"""The fair queue of sandbox slots: a bound, turns by key, cancellation, several loops."""

from __future__ import annotations

import asyncio
import threading

import pytest

from envbuilder.isolation.sandbox import Slots, default_concurrency
from envbuilder.isolation.sandbox._slots import CONCURRENCY_ENV


async def test_keys_take_turns_and_the_bound_holds() -> None:
    slots = Slots(1)
    order: list[str] = []
    peak = [0, 0]

    async def run(key: str, tag: str) -> None:
        async with slots.slot(key):
            peak[0] += 1
            peak[1] = max(peak)
            order.append(tag)
            await asyncio.sleep(0.01)
            peak[0] -= 1

    async with slots.slot("a"):  # everything below queues behind this holder
        tasks = [asyncio.create_task(run("a", f"a{i}")) for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(run("b", "b0")))
        tasks.append(asyncio.create_task(run(None, "n0")))
        await asyncio.sleep(0.01)
        assert slots.waiting == 6
    await asyncio.gather(*tasks)
    # Session "a" sent four at once; "b" and the keyless call still go second and third.
    assert order == ["a0", "b0", "n0", "a1", "a2", "a3"]
    assert peak[1] == 1 and slots.in_use == 0


async def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    slots = Slots(1)
    async with slots.slot():
        waiter = asyncio.create_task(slots._acquire(None))
        after = asyncio.create_task(slots._acquire(None))
        await asyncio.sleep(0)
        waiter.cancel()
    await after
    assert slots.in_use == 1
    slots._release()
    assert slots.in_use == 0 and slots.waiting == 0


def test_loops_in_other_threads_share_the_bound() -> None:
    slots = Slots(2)
    running, peak, lock = [0], [0], threading.Lock()

    async def work() -> None:
        for _ in range(5):
            async with slots.slot():
                with lock:
                    running[0] += 1
                    peak[0] = max(peak[0], running[0])
                await asyncio.sleep(0.005)
                with lock:
                    running[0] -= 1

    threads = [threading.Thread(target=asyncio.run, args=(work(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2 and slots.in_use == 0


def test_threads_that_block_queue_with_the_loops_and_keys_take_turns() -> None:
    slots = Slots(1)
    order: list[str] = []

    def run(key: str, tag: str) -> None:
        with slots.hold(key):
            order.append(tag)

    async def holder() -> None:
        async with slots.slot("a"):
            threads = [threading.Thread(target=run, args=("a", f"a{i}")) for i in range(3)]
            for t in threads:
                t.start()
            while slots.waiting < 3:
                await asyncio.sleep(0.005)
            threads.append(threading.Thread(target=run, args=("b", "b0")))
            threads[-1].start()
            while slots.waiting < 4:
                await asyncio.sleep(0.005)
        for t in threads:
            await asyncio.to_thread(t.join)

    asyncio.run(holder())
    assert order[:2] == ["a0", "b0"] and sorted(order) == ["a0", "a1", "a2", "b0"]
    assert slots.in_use == 0 and slots.waiting == 0


def test_default_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONCURRENCY_ENV, "3")
    assert default_concurrency() == 3
    monkeypatch.setenv(CONCURRENCY_ENV, "zero")
    with pytest.raises(ValueError, match="ENVBUILDER_SANDBOX_CONCURRENCY must be a whole number"):
        default_concurrency()
    monkeypatch.delenv(CONCURRENCY_ENV)
    assert default_concurrency() >= 1
