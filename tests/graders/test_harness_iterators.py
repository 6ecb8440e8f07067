"""The harness against answers that end the tests' iteration early: a ``StopIteration`` (or
``StopAsyncIteration``) from the function would stop a test's ``map``/``filter``/generator
silently, so ``all(...)`` held on nothing; over real bubblewrap, it scores 0 while a right
answer still passes the same tests."""

from __future__ import annotations

import pytest

from envbuilder.graders import Outcome
from tests.graders._util import grade, make
from tests.graders.test_harness import HARNESSED

TASK = {
    "prompt": 'def double(x):\n    """Twice x."""\n',
    "test": (
        "def check(candidate):\n"
        "    assert all(map(lambda x: candidate(x) == 2 * x, [1, 2, 3]))\n"
        "    assert not list(filter(lambda x: candidate(x) != 2 * x, range(5)))\n"
        "    assert all(candidate(x) == 2 * x for x in (7, 8))\n"
    ),
    "entry_point": "double",
}


async def test_a_right_answer_passes_the_iterating_tests() -> None:
    result = await grade(make(HARNESSED), "    return 2 * x\n", TASK)
    assert (result.outcome, result.score) == (Outcome.CORRECT, 1.0), result.reason


@pytest.mark.parametrize(
    "answer",
    [
        "    raise StopIteration\n",
        "    raise StopIteration(2 * x)\n",
        "    raise StopAsyncIteration\n",
        "    class Stop(StopIteration):\n        pass\n    raise Stop\n",
        "    return next(iter([]))\n",
    ],
    ids=["raise", "raise with a value", "async", "subclass", "next of empty"],
)
async def test_an_answer_that_stops_the_iteration_scores_zero(answer: str) -> None:
    result = await grade(make(HARNESSED), answer, TASK)
    assert (result.outcome, result.score) == (Outcome.INCORRECT, 0.0), result.reason
    assert "a test failed: RuntimeError" in result.reason
