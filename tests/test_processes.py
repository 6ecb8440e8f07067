"""The worker processes: a check past its deadline is killed and replaced, errors come back
as they were raised, a dead worker is an error (never a hang), and parties take turns."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder import budget
from envbuilder.processes import CheckTimeout, ProcessPool, WorkerFailed


def spin(seconds: float) -> str:
    """Hold the worker's interpreter in one C call (a huge power), like SymPy on 9^9^9^9."""
    if seconds > 100:
        return str(len(str(9 ** (9**9))))  # minutes in one call
    time.sleep(seconds)
    return "done"


def pid() -> int:
    return os.getpid()


def niceness() -> int:
    return os.nice(0)


def fail(message: str) -> None:
    raise ValueError(message)


def die() -> None:
    os._exit(3)


def hog() -> int:
    return len(bytearray(8 << 30))  # past the worker's address-space limit


@pytest.fixture
def pool() -> Iterator[ProcessPool]:
    pool = ProcessPool(2)
    yield pool
    pool.close()


@pytest.mark.asyncio
async def test_a_check_past_its_deadline_is_killed_and_replaced(pool: ProcessPool) -> None:
    first = await pool.run(pid, timeout=30)
    with pytest.raises(CheckTimeout):
        await pool.run(spin, 1000.0, timeout=1)
    assert pool.killed == 1
    assert first not in pool.processes or len(pool.processes) <= 2
    # The pool still serves, from a fresh worker where the killed one was.
    assert await pool.run(spin, 0.0, timeout=30) == "done"


@pytest.mark.asyncio
async def test_the_loop_keeps_running_while_a_check_holds_its_worker(pool: ProcessPool) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        with pytest.raises(CheckTimeout):
            await pool.run(spin, 1000.0, timeout=1)
    finally:
        ticker.cancel()
    assert ticks > 20  # the event loop ran throughout


@pytest.mark.asyncio
async def test_errors_come_back_and_the_worker_is_kept(pool: ProcessPool) -> None:
    before = await pool.run(pid, timeout=30)
    with pytest.raises(ValueError, match="bad answer"):
        await pool.run(fail, "bad answer", timeout=30)
    assert await pool.run(pid, timeout=30) == before


@pytest.mark.asyncio
async def test_a_worker_that_dies_is_an_error_then_replaced(pool: ProcessPool) -> None:
    with pytest.raises(WorkerFailed, match="exited"):
        await pool.run(die, timeout=30)
    with pytest.raises((WorkerFailed, MemoryError)):
        await pool.run(hog, timeout=30)
    assert await pool.run(spin, 0.0, timeout=30) == "done"


@pytest.mark.asyncio
async def test_parties_take_turns() -> None:
    pool = ProcessPool(1)
    order: list[str] = []

    async def run(party: str, seconds: float) -> None:
        with budget.party(party):
            await pool.run(spin, seconds, timeout=30)
        order.append(party)

    try:
        await pool.run(spin, 0.0, timeout=30)  # started and warm
        jobs = [asyncio.ensure_future(run("hoarder", 0.3)) for _ in range(4)]
        await asyncio.sleep(0.1)
        jobs.append(asyncio.ensure_future(run("honest", 0.0)))
        await asyncio.gather(*jobs)
    finally:
        pool.close()
    assert order.index("honest") <= 2  # served after at most the hoarder's running and next check


@pytest.mark.asyncio
async def test_close_kills_every_worker(pool: ProcessPool) -> None:
    await asyncio.gather(pool.run(spin, 0.2, timeout=30), pool.run(spin, 0.2, timeout=30))
    pids = pool.processes
    assert len(pids) == 2
    pool.close()
    for p in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


@pytest.mark.asyncio
async def test_workers_yield_the_cpu_to_the_server(pool: ProcessPool) -> None:
    from envbuilder.processes import NICENESS

    assert await pool.run(niceness, timeout=30) == os.nice(0) + NICENESS


def test_a_confined_worker_starts_here_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.processes import why_unconfined

    assert why_unconfined() is None  # bubblewrap is installed where the tests run
    fake = tmp_path / "bwrap"  # a bubblewrap that cannot make namespaces, as in some containers
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert (
        why_unconfined() == "bubblewrap exited with status 1: bwrap: No permissions to create new namespace"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert "needs `bwrap`, which is not installed" in (why_unconfined() or "")
