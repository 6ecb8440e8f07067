from __future__ import annotations

import pytest

from envbuilder.graders import Outcome
from tests.graders._util import grade, make

MMLU = {"question": "2+2?", "choices": ["3", "4", "5", "22"], "answer": 1}


@pytest.mark.parametrize(
    "answer",
    [
        "B",
        "b",
        "(B)",
        "B.",
        "**B**",
        "The answer is B",
        "The answer is (B).",
        "B) 4",
        "(B) 4",
        "Answer: B",
        "I compared them all. The correct answer is: **B**",
        "\\boxed{B}",
        "4",
    ],
)
async def test_forms_of_the_right_letter(answer: str) -> None:
    g = make({"type": "choice", "target": "{{ answer }}", "choices_field": "choices"})
    assert (await grade(g, answer, MMLU)).outcome is Outcome.CORRECT


@pytest.mark.parametrize("answer", ["A", "(C)", "The answer is D", "D) 22"])
async def test_wrong_letters(answer: str) -> None:
    g = make({"type": "choice", "target": "{{ answer }}", "choices_field": "choices"})
    result = await grade(g, answer, MMLU)
    assert result.outcome is Outcome.INCORRECT
    assert result.details["target"] == "B"


@pytest.mark.parametrize("answer", ["I am not sure", "E", "the answer is a bit unclear", ""])
async def test_unclear_answers_are_ungradeable(answer: str) -> None:
    g = make({"type": "choice", "target": "{{ answer }}", "choices_field": "choices"})
    assert (await grade(g, answer, MMLU)).outcome is Outcome.UNGRADEABLE


async def test_letter_target_one_based_indices_and_numbers() -> None:
    letter = make({"type": "choice", "target": "{{ key }}", "num_choices": 4})
    assert (await grade(letter, "c", {"key": "C"})).outcome is Outcome.CORRECT
    one_based = make({"type": "choice", "target": "{{ key }}", "index_base": 1, "accept_numbers": True})
    assert (await grade(one_based, "3", {"key": 3})).outcome is Outcome.CORRECT
    assert (await grade(one_based, "C", {"key": 3})).outcome is Outcome.CORRECT
    no_numbers = make({"type": "choice", "target": "{{ key }}"})
    assert (await grade(no_numbers, "3", {"key": "C"})).outcome is Outcome.UNGRADEABLE


def test_mmlu_rows() -> None:
    import asyncio

    import pyarrow.parquet as pq

    from tests.conftest import DATA

    path = DATA / "mmlu_stem/test-00000-of-00001.parquet"
    rows = pq.read_table(path).slice(0, 50).to_pylist()
    g = make({"type": "choice", "target": "{{ answer }}", "choices_field": "choices"})
    for row in rows:
        letter = "ABCD"[row["answer"]]
        assert asyncio.run(g.grade(f"The answer is ({letter}).", row, {})).outcome is Outcome.CORRECT
        wrong = "ABCD"[(row["answer"] + 1) % 4]
        assert asyncio.run(g.grade(wrong, row, {})).outcome is Outcome.INCORRECT


async def test_a_target_that_names_no_option_is_not_quoted_in_the_reason() -> None:
    g = make({"type": "choice", "target": "{{ answer }}", "choices_field": "choices"})
    result = await grade(g, "B", {**MMLU, "answer": "the secret gold"})
    assert result.outcome is Outcome.UNGRADEABLE
    assert result.reason == "the task's target names no option"
    assert result.details["target"] == "the secret gold"
