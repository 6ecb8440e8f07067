"""The one event loop in a thread: synchronous code runs coroutines on its thread's own loop, or
on the shared loop thread when it is inside a running loop already (never a nested loop)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
from typing import Any

import pytest

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


# -- the eager start: a coroutine that never waits costs no turn of the loop ------------------


def _thread_loop() -> asyncio.AbstractEventLoop:
    return run_sync(_where())[1]


def test_a_coroutine_that_never_waits_runs_no_turn_of_the_loop() -> None:
    loop = _thread_loop()
    ran: list[str] = []
    handle = loop.call_at(loop.time(), ran.append, "timer")  # due now: any turn would run it

    async def immediate() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    task = run_sync(immediate())
    assert ran == []  # no turn of the loop ran it
    assert isinstance(task, asyncio.Task) and task.done()  # a real task was current all along
    handle.cancel()


def test_a_coroutine_that_waits_goes_on_in_the_same_task_under_the_loop() -> None:
    def later(fut: asyncio.Future[int]) -> None:
        fut.get_loop().call_soon_threadsafe(fut.set_result, 41)

    async def waits() -> tuple[bool, int]:
        before = asyncio.current_task()
        await asyncio.sleep(0)  # a bare yield
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        threading.Thread(target=later, args=(fut,)).start()
        value = await fut  # a real wait, ended by another thread
        return asyncio.current_task() is before, value + 1

    assert run_sync(waits()) == (True, 42)


class _Mine(ValueError):
    pass


@pytest.mark.parametrize("task", [True, False], ids=["task", "taskless"])
def test_exceptions_propagate_with_their_own_type_before_and_after_a_wait(task: bool) -> None:
    async def fails_at_once() -> None:
        raise _Mine("at once")

    async def fails_later() -> None:
        await asyncio.sleep(0.001)
        raise _Mine("later")

    for coro, message in ((fails_at_once(), "at once"), (fails_later(), "later")):
        try:
            run_sync(coro, task=task)
        except _Mine as exc:
            assert str(exc) == message
        else:
            raise AssertionError("no exception")
    assert run_sync(_where(), task=task)[0] == threading.get_ident()  # the loop is still usable after


def test_a_deadline_fires_in_a_timeout_entered_during_the_eager_step() -> None:
    async def too_slow() -> None:
        async with asyncio.timeout(0.05):  # needs a current task: the eager step has one
            await asyncio.sleep(30)

    try:
        run_sync(too_slow())
    except TimeoutError:
        pass
    else:
        raise AssertionError("the timeout did not fire")


def test_a_watchdog_deadline_stops_a_coroutine_that_never_waits() -> None:
    from envbuilder.deadlines import Overrun, deadline

    async def spins() -> None:
        with deadline(0.05):
            while True:
                pass

    try:
        run_sync(spins())
    except Overrun:
        pass
    else:
        raise AssertionError("the deadline did not fire")


def test_cancellation_before_and_after_a_wait_raises_cancelled_error() -> None:
    async def cancels_itself(wait_first: bool) -> None:
        if wait_first:
            await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)

    for wait_first in (False, True):
        try:
            run_sync(cancels_itself(wait_first))
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("not cancelled")


_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="unset")


def test_context_variables_are_the_callers_and_changes_stay_in_the_task() -> None:
    async def reads_and_sets() -> str:
        seen = _var.get()
        _var.set("inside")
        return seen

    token = _var.set("caller")
    try:
        assert run_sync(reads_and_sets()) == "caller"
        assert _var.get() == "caller"  # the task ran in a copy, as under run_until_complete
    finally:
        _var.reset(token)


def test_callbacks_the_coroutine_scheduled_run_before_the_result_is_returned() -> None:
    ran: list[str] = []

    async def schedules() -> str:
        asyncio.get_running_loop().call_soon(ran.append, "callback")
        return "done"

    assert run_sync(schedules()) == "done"
    assert ran == ["callback"]


def test_calls_while_other_threads_post_to_the_loop_keep_their_results() -> None:
    loop = _thread_loop()
    stop = threading.Event()
    posted: list[int] = []

    def post() -> None:
        while not stop.is_set():
            loop.call_soon_threadsafe(posted.append, 1)

    async def echo(i: int) -> int:
        return i

    poster = threading.Thread(target=post)
    poster.start()
    try:
        results = [run_sync(echo(i)) for i in range(2000)]
    finally:
        stop.set()
        poster.join()
    assert results == list(range(2000))
    run_sync(asyncio.sleep(0))  # what the poster queued last runs on the next turn
    assert posted  # its callbacks ran on the loop's turns, none was lost to the eager start


def test_run_sync_inside_an_eager_step_goes_to_the_shared_thread() -> None:
    async def outer() -> tuple[int, asyncio.AbstractEventLoop]:
        return run_sync(_where())

    ident, loop = run_sync(outer())
    assert ident == shared_loop().thread.ident and loop is shared_loop().loop


# -- task=False: no task until the coroutine first waits ------------------------------------------


def test_a_taskless_call_that_never_waits_has_no_task_and_runs_no_turn_of_the_loop() -> None:
    loop = _thread_loop()
    ran: list[str] = []
    handle = loop.call_at(loop.time(), ran.append, "timer")  # due now: any turn would run it

    async def immediate() -> tuple[asyncio.Task[object] | None, asyncio.AbstractEventLoop]:
        return asyncio.current_task(), asyncio.get_running_loop()

    task, running = run_sync(immediate(), task=False)
    assert task is None and running is loop  # the thread's loop, set as running, and no task
    assert ran == []
    handle.cancel()


def test_a_taskless_call_goes_on_in_a_real_task_once_it_waits() -> None:
    def later(fut: asyncio.Future[int]) -> None:
        fut.get_loop().call_soon_threadsafe(fut.set_result, 41)

    async def waits() -> tuple[bool, bool, int]:
        before = asyncio.current_task()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        threading.Thread(target=later, args=(fut,)).start()
        value = await fut  # a real wait, ended by another thread
        after = asyncio.current_task()
        await asyncio.sleep(0)  # a bare yield, passed through to the task
        return before is None, after is not None and asyncio.current_task() is after, value + 1

    assert run_sync(waits(), task=False) == (True, True, 42)


def test_a_timeout_entered_after_the_first_wait_of_a_taskless_call_fires_and_unwinds() -> None:
    unwound: list[str] = []

    async def too_slow() -> None:
        await asyncio.sleep(0)
        try:
            async with asyncio.timeout(0.05):  # the task's own: it cancels the coroutine inside
                await asyncio.sleep(30)
        finally:
            unwound.append("finally")

    try:
        run_sync(too_slow(), task=False)
    except TimeoutError:
        pass
    else:
        raise AssertionError("the timeout did not fire")
    assert unwound == ["finally"]


def test_a_taskless_call_cancelled_after_its_first_wait_raises_cancelled_error() -> None:
    async def cancels_itself() -> None:
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)

    try:
        run_sync(cancels_itself(), task=False)
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("not cancelled")


def test_a_taskless_call_runs_in_a_copy_of_the_callers_context_across_its_wait() -> None:
    async def reads_and_sets() -> tuple[str, str]:
        seen = _var.get()
        _var.set("inside")
        await asyncio.sleep(0)  # the task it goes on in has the same context
        return seen, _var.get()

    token = _var.set("caller")
    try:
        assert run_sync(reads_and_sets(), task=False) == ("caller", "inside")
        assert _var.get() == "caller"  # its changes stayed in its copy, as in a task
    finally:
        _var.reset(token)


def test_callbacks_a_taskless_call_scheduled_run_before_its_result_or_error_is_returned() -> None:
    ran: list[str] = []

    async def schedules(fail: bool) -> str:
        asyncio.get_running_loop().call_soon(ran.append, "callback")
        if fail:
            raise _Mine("after scheduling")
        return "done"

    assert run_sync(schedules(False), task=False) == "done"
    assert ran == ["callback"]
    with contextlib.suppress(_Mine):
        run_sync(schedules(True), task=False)
    assert ran == ["callback", "callback"]


@pytest.mark.parametrize("task", [True, False])
def test_async_generators_of_a_step_outside_the_loop_belong_to_the_loop_and_the_hooks_are_restored(
    task: bool,
) -> None:
    """The step run outside ``run_forever`` sets the loop's async generator hooks, as
    ``run_forever`` does (a generator first iterated there is the loop's to finalise), and puts
    back the caller's afterwards, also on a loop made anew after one was closed."""
    seen: list[str] = []

    def firstiter(agen: object) -> None:
        seen.append("caller's")

    async def numbers() -> Any:
        yield 1
        yield 2

    async def first_of() -> tuple[int, bool]:
        agen = numbers()
        value = await agen.__anext__()  # left unfinished: the loop finalises it
        return value, agen in asyncio.get_running_loop()._asyncgens  # type: ignore[attr-defined]

    before = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=None)
    try:
        for _ in range(2):
            assert run_sync(first_of(), task=task) == (1, True)
            assert sys.get_asyncgen_hooks() == (firstiter, None)
            run_sync(_where())[1].close()  # the next call makes a new loop with its own hooks
        assert seen == []
    finally:
        sys.set_asyncgen_hooks(*before)
