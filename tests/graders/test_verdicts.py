"""Remembered and shared verdicts (``graders._verdicts``), and the ``math`` grader using them."""

from __future__ import annotations

import asyncio

import pytest

from envbuilder.graders import Outcome
from envbuilder.graders._verdicts import Verdicts
from envbuilder.isolation.processes import CheckTimeout
from tests.graders._util import grade, make


class Runs:
    """A check that counts its runs and finishes when told to."""

    def __init__(self, verdict: str = "v") -> None:
        self.count = 0
        self.verdict = verdict
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self) -> str:
        self.count += 1
        self.started.set()
        await self.release.wait()
        return self.verdict


async def test_a_verdict_is_remembered_for_the_same_key() -> None:
    v: Verdicts[str] = Verdicts()
    run = Runs()
    run.release.set()
    assert await v.check(("a", "t"), run) == "v"
    assert await v.check(("a", "t"), run) == "v"
    assert await v.check(("b", "t"), run) == "v"
    assert (run.count, v.runs, v.hits, len(v)) == (2, 2, 1, 2)


async def test_callers_of_a_check_in_flight_share_its_one_run() -> None:
    v: Verdicts[str] = Verdicts()
    run = Runs()
    callers = [asyncio.create_task(v.check(("a", "t"), run)) for _ in range(16)]
    await run.started.wait()
    await asyncio.sleep(0)
    assert run.count == 1 and not any(c.done() for c in callers)
    run.release.set()
    assert await asyncio.gather(*callers) == ["v"] * 16
    assert (run.count, v.runs, v.hits) == (1, 1, 15)


async def test_a_failed_check_is_not_remembered_and_its_waiters_see_the_failure() -> None:
    v: Verdicts[str] = Verdicts()
    gate = asyncio.Event()
    calls = 0

    async def times_out() -> str:
        nonlocal calls
        calls += 1
        await gate.wait()
        raise CheckTimeout("over 10 s")

    first = asyncio.create_task(v.check(("a", "t"), times_out))
    second = asyncio.create_task(v.check(("a", "t"), times_out))
    await asyncio.sleep(0.01)
    gate.set()
    for caller in (first, second):
        with pytest.raises(CheckTimeout):
            await caller
    assert calls == 1 and len(v) == 0
    ok = Runs("fine")
    ok.release.set()
    assert await v.check(("a", "t"), ok) == "fine"  # checked again, not the failure replayed
    assert ok.count == 1


async def test_a_caller_that_goes_away_does_not_cancel_the_check_of_the_others() -> None:
    v: Verdicts[str] = Verdicts()
    run = Runs()
    leaver = asyncio.create_task(v.check(("a", "t"), run))
    stayer = asyncio.create_task(v.check(("a", "t"), run))
    await run.started.wait()
    leaver.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaver
    run.release.set()
    assert await stayer == "v"
    assert run.count == 1 and len(v) == 1


async def test_the_table_is_bounded_and_long_keys_are_never_kept() -> None:
    v: Verdicts[str] = Verdicts(size=3, max_key_chars=10)
    run = Runs()
    run.release.set()
    for key in ("a", "b", "c", "a", "d"):  # "a" used again: "b" is the oldest when "d" comes
        await v.check((key, "t"), run)
    assert len(v) == 3 and run.count == 4
    await v.check(("b", "t"), run)
    assert run.count == 5
    await v.check(("c", "t"), run)
    assert run.count == 6  # "c" went when "b" came back (a, d, b were the last three used)
    long = ("x" * 10, "t")
    await v.check(long, run)
    await v.check(long, run)
    assert run.count == 8 and len(v) == 3


async def test_the_math_grader_runs_one_checker_process_per_distinct_answer() -> None:
    pytest.importorskip("math_verify")
    g = make({"type": "math", "target": "{{ answer }}"})
    task = {"answer": "2\\sqrt{2}"}
    # Only SymPy decides these (no plain number, not the same text): each went to a checker process.
    answers = ["\\sqrt{8}", "2^{3/2}", "\\sqrt{8}", "\\sqrt{7}", "\\sqrt{8}"]
    grades = await asyncio.gather(*(grade(g, a, task) for a in answers))
    ok, no = Outcome.CORRECT, Outcome.INCORRECT
    assert [x.outcome for x in grades] == [ok, ok, ok, no, ok]
    verdicts = g.verdicts  # type: ignore[attr-defined]
    assert (verdicts.runs, verdicts.hits) == (3, 2)
    again = await grade(g, "2^{3/2}", task)
    assert again.outcome is ok and again.reason == grades[1].reason
    assert (verdicts.runs, verdicts.hits) == (3, 3)
    # The same answer against another target is another check.
    assert (await grade(g, "\\sqrt{8}", {"answer": "3\\sqrt{2}"})).outcome is no
    assert verdicts.runs == 4
    await g.aclose()
