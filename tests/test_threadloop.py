"""The one event loop in a thread: synchronous code runs coroutines on its thread's own loop, or
on the shared loop thread when it is inside a running loop already (never a nested loop)."""

from __future__ import annotations

import asyncio
import threading

from envbuilder.threadloop import LoopThread, run_sync, shared_loop


async def _where() -> tuple[int, asyncio.AbstractEventLoop]:
    return threading.get_ident(), asyncio.get_running_loop()


def test_sync_code_runs_on_its_own_threads_loop_and_keeps_it() -> None:
    first = run_sync(_where())
    second = run_sync(_where())
    assert first[0] == threading.get_ident()  # no thread hop
    assert first[1] is second[1]  # the same loop each time: connections opened on it stay usable


def test_code_inside_a_running_loop_hands_the_call_to_the_shared_thread() -> None:
    async def inside() -> tuple[int, asyncio.AbstractEventLoop]:
        return run_sync(_where())  # a blocking call from a coroutine, as trainers make them

    caller = threading.get_ident()
    ident, loop = asyncio.run(inside())
    assert ident != caller and ident == shared_loop().thread.ident and loop is shared_loop().loop


def test_a_loop_thread_runs_submits_and_closes_once() -> None:
    portal = LoopThread("test-loop")
    ident, loop = portal.run(_where())
    assert ident == portal.thread.ident and loop is portal.loop
    assert portal.submit(asyncio.sleep(0, result=7)).result() == 7
    portal.close()
    portal.close()  # idempotent
    assert portal.closed and not portal.thread.is_alive()
