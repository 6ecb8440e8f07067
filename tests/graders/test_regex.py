from __future__ import annotations

import time

import pytest

from envbuilder.graders import Outcome
from tests.graders._util import grade, make


async def test_pattern_interpolates_task_values_escaped() -> None:
    g = make({"type": "regex", "pattern": r"^\s*{{ answer }}\s*$"})
    task = {"answer": "3.5 (approx.)"}
    assert (await grade(g, " 3.5 (approx.) ", task)).outcome is Outcome.CORRECT
    # "." and "(" are literal: "3x5 (approx!)" would match an unescaped pattern.
    assert (await grade(g, "3x5 (approx!)", task)).outcome is Outcome.INCORRECT
    assert g.fields == {"answer"}


async def test_search_fullmatch_and_flags() -> None:
    search = make({"type": "regex", "pattern": "paris", "flags": ["ignorecase"]})
    assert (await grade(search, "It is Paris.", {})).outcome is Outcome.CORRECT
    full = make({"type": "regex", "pattern": "paris", "mode": "fullmatch", "flags": ["ignorecase"]})
    assert (await grade(full, "It is Paris.", {})).outcome is Outcome.INCORRECT
    assert (await grade(full, "PARIS", {})).outcome is Outcome.CORRECT


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)+$"])
async def test_redos_pattern_is_bounded(pattern: str) -> None:
    g = make({"type": "regex", "pattern": pattern, "timeout": 0.05})
    started = time.perf_counter()
    result = await grade(g, "a" * 50 + "!", {})
    # Unbounded, backtracking this pattern over 51 characters takes hours: 30 s tells a bounded
    # search from a hang on any machine, however loaded (the bound itself is 0.05 s).
    assert time.perf_counter() - started < 30
    # Either the engine sees there is no match, or it runs out of time: never a hang.
    assert result.outcome in (Outcome.INCORRECT, Outcome.UNGRADEABLE)
    if result.outcome is Outcome.UNGRADEABLE:
        assert "took too long" in result.reason


async def test_catastrophic_pattern_times_out_as_ungradeable() -> None:
    g = make({"type": "regex", "pattern": r"(a|aa)+$", "timeout": 0.02})
    result = await grade(g, "a" * 60 + "!", {})
    assert result.outcome is Outcome.UNGRADEABLE and result.score is None


async def test_huge_answer_is_capped() -> None:
    g = make({"type": "regex", "pattern": "x", "max_answer_chars": 1000})
    result = await grade(g, "x" * 1001, {})
    assert result.outcome is Outcome.UNGRADEABLE
    assert "too long" in result.reason


def test_invalid_pattern_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        make({"type": "regex", "pattern": "(x{{ answer }}"})


async def test_a_long_timeout_is_honoured_by_killing_the_match() -> None:
    """The engine checks its own timeout only now and then (``timeout: 4`` ran ~16 s): past a
    short try, the match runs in a grading process killed at the budget."""
    import asyncio

    from envbuilder.isolation.processes import grading_pool

    g = make({"type": "regex", "pattern": r"^(a|aa)+$", "mode": "fullmatch", "timeout": 4})
    killed = grading_pool().killed
    graded = asyncio.ensure_future(grade(g, "a" * 60 + "!", {}))
    reference = asyncio.ensure_future(asyncio.sleep(14))  # well under the old ~16 s
    done, _ = await asyncio.wait({graded, reference}, return_when=asyncio.FIRST_COMPLETED)
    reference.cancel()
    assert graded in done
    result = graded.result()
    assert result.outcome is Outcome.UNGRADEABLE and "took too long" in result.reason
    assert grading_pool().killed == killed + 1
    # An ordinary answer stays in the server (no process) and is graded as before.
    assert (await grade(g, "aaaa", {})).outcome is Outcome.CORRECT
