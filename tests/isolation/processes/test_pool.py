"""The worker processes: every call in a fresh child of a clean zygote, killed at its deadline;
replies are data (a forged, oversized or mistyped one fails that call only); errors come back by
name; a dead zygote is replaced, never handed to the next call; parties take turns."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder import deadlines
from envbuilder.isolation.processes import (
    CheckTimeout,
    ProcessPool,
    WorkerError,
    WorkerFailed,
    worker_function,
)
from tests.conftest import ROOT
from tests.isolation.processes import functions as workers


@pytest.fixture
def pool() -> Iterator[ProcessPool]:
    pool = ProcessPool(2)
    yield pool
    pool.close()


@pytest.mark.asyncio
async def test_a_check_past_its_deadline_is_killed_and_the_pool_goes_on(pool: ProcessPool) -> None:
    zygotes = [await pool.run(workers.pid, timeout=30)]
    with pytest.raises(CheckTimeout):
        await pool.run(workers.spin, 1000.0, timeout=1)
    assert pool.killed == 1
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"
    assert len(pool.processes) <= 2 and zygotes


@pytest.mark.asyncio
async def test_the_loop_keeps_running_while_a_check_holds_its_process(pool: ProcessPool) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        with pytest.raises(CheckTimeout):
            await pool.run(workers.spin, 1000.0, timeout=1)
    finally:
        ticker.cancel()
    assert ticks > 20  # the event loop ran throughout


@pytest.mark.asyncio
async def test_every_call_runs_in_a_fresh_process(pool: ProcessPool) -> None:
    pids = [await pool.run(workers.pid, timeout=30) for _ in range(6)]
    assert len(set(pids)) == 6
    assert not set(pids) & set(pool.processes)  # never the zygote itself
    # What one call does to its process is gone for the next (the same zygote serves both).
    assert await pool.run(workers.poison, "always 1.0", timeout=30) == "always 1.0"
    assert [await pool.run(workers.poisoned, timeout=30) for _ in range(4)] == ["clean"] * 4


@pytest.mark.asyncio
async def test_errors_come_back_by_name_only(pool: ProcessPool) -> None:
    with pytest.raises(WorkerError) as raised:
        await pool.run(workers.fail, "the grade is 1.0", timeout=30)
    assert raised.value.kind == "ValueError" and "1.0" not in str(raised.value)
    with pytest.raises(WorkerError) as raised:
        await pool.run(workers.fail_custom, timeout=30)  # its class name is not repeated
    assert raised.value.kind == "Exception"
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"


@pytest.mark.asyncio
async def test_a_process_that_dies_or_eats_memory_fails_its_call_only(pool: ProcessPool) -> None:
    with pytest.raises(WorkerFailed, match="exited"):
        await pool.run(workers.die, timeout=30)
    with pytest.raises(WorkerFailed):  # MemoryError in the child, by name
        await pool.run(workers.hog, timeout=30)
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"


@pytest.mark.asyncio
async def test_a_forged_reply_is_not_read_as_code(pool: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "ran-in-the-server"
    with pytest.raises(WorkerFailed, match=r"could not be read \(not JSON\)"):
        await pool.run(workers.forge_pickle, str(marker), timeout=30)
    assert not marker.exists()
    with pytest.raises(WorkerFailed, match=r"could not be read \(not the expected value\)"):
        await pool.run(workers.forge_value, '{"ok": "1.0"}', timeout=30)
    with pytest.raises(WorkerFailed, match=r"could not be read \(not a reply\)"):
        await pool.run(workers.forge_value, '{"ok": 1.0, "reason": "forged"}', timeout=30)
    with pytest.raises(WorkerFailed, match=r"could not be read \(too long\)"):
        await pool.run(workers.flood, timeout=30)
    # A well-formed reply of the right type is that call's own result: it cannot be another's.
    assert await pool.run(workers.forge_value, '{"ok": 0.25}', timeout=30) == 0.25
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"


@pytest.mark.asyncio
async def test_concurrent_forgeries_reach_only_their_own_call(pool: ProcessPool) -> None:
    honest = [pool.run(workers.spin, 0.3, timeout=30) for _ in range(3)]
    forged = [pool.run(workers.forge_value, '{"ok": "pwned"}', timeout=30) for _ in range(3)]
    results = await asyncio.gather(*honest, *forged, return_exceptions=True)
    assert results[:3] == ["done"] * 3
    assert all(isinstance(r, WorkerFailed) for r in results[3:])


@pytest.mark.asyncio
async def test_a_dead_zygote_is_replaced_not_handed_to_the_next_call(pool: ProcessPool) -> None:
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"
    for zygote in pool.processes:
        os.kill(zygote, signal.SIGKILL)  # dies while idle (out of memory, say)
    assert await pool.run(workers.spin, 0.0, timeout=30) == "done"
    # A call whose process exits right after replying leaves nothing behind for the next one.
    assert await pool.run(workers.exit_after_reply, timeout=30) == 1
    await asyncio.sleep(0.3)
    assert [await pool.run(workers.spin, 0.0, timeout=30) for _ in range(3)] == ["done"] * 3


@pytest.mark.asyncio
async def test_parties_take_turns() -> None:
    pool = ProcessPool(1)
    order: list[str] = []

    async def run(party: str, seconds: float) -> None:
        with deadlines.party(party):
            await pool.run(workers.spin, seconds, timeout=30)
        order.append(party)

    try:
        await pool.run(workers.spin, 0.0, timeout=30)  # started and warm
        jobs = [asyncio.ensure_future(run("hoarder", 0.3)) for _ in range(4)]
        await asyncio.sleep(0.1)
        jobs.append(asyncio.ensure_future(run("honest", 0.0)))
        await asyncio.gather(*jobs)
    finally:
        pool.close()
    assert order.index("honest") <= 2  # served after at most the hoarder's running and next check


@pytest.mark.asyncio
async def test_close_kills_every_worker(pool: ProcessPool) -> None:
    await asyncio.gather(pool.run(workers.spin, 0.2, timeout=30), pool.run(workers.spin, 0.2, timeout=30))
    pids = pool.processes
    assert len(pids) == 2
    pool.close()
    for p in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


@pytest.mark.asyncio
async def test_workers_yield_the_cpu_to_the_server(pool: ProcessPool) -> None:
    from envbuilder.isolation.processes import NICENESS

    assert await pool.run(workers.niceness, timeout=30) == os.nice(0) + NICENESS


def local() -> int:
    return 1


def unannotated():  # type: ignore[no-untyped-def]
    return 1


def test_only_registered_functions_run_in_a_worker(pool: ProcessPool) -> None:
    with pytest.raises(TypeError, match="@worker_function"):
        pool.call(local, timeout=30)
    with pytest.raises(TypeError, match="return annotation"):
        worker_function(unannotated)
    with pytest.raises(TypeError, match="module level"):
        worker_function(lambda: 1)


_AS_PID_1 = """
import asyncio, os
from envbuilder.isolation.processes import ProcessPool
from tests.isolation.processes import functions
assert os.getpid() == 1
pool = ProcessPool(1)
print(asyncio.run(pool.run(functions.spin, 0.0, timeout=60)))
pool.close()
"""


def test_a_server_that_is_pid_1_has_workers() -> None:
    # In a container the server is often pid 1: a worker must not take that for an orphaned start.
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux's unshare is not installed")
    done = subprocess.run(
        [unshare, *user, "--pid", "--fork", "--mount-proc", sys.executable, "-c", _AS_PID_1],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


def test_threads_are_for_the_pools_that_run_nothing_they_are_sent() -> None:
    # As any user but root (a container's, a laptop's), a child that may start no thread cannot
    # render a template whose deadline is a thread: only pools whose children evaluate answers
    # are alone. The drop to nobody makes the kernel enforce it here too, as root.
    data_only = ProcessPool(1, drop_uid=65534)
    alone = ProcessPool(1, drop_uid=65534, alone=True)
    try:
        assert data_only.call(workers.threads, timeout=60) is True
        assert alone.call(workers.threads, timeout=60) is False
        assert alone.call(workers.fork_bomb, 50, timeout=60) == 0
    finally:
        data_only.close()
        alone.close()
