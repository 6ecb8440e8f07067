from __future__ import annotations

import asyncio

import pytest

from envbuilder.graders import GraderContext, Outcome
from envbuilder.graders._exact import ExactMatchConfig, ExactMatchGrader
from envbuilder.graders._normalize import canonical_number, extract_number

TASK = {"answer": "work...\n#### 72", "big": "#### 1,000"}


def grade(answer: str, target: str = "{{ answer.split('####')[-1] }}", **cfg: object):
    config = ExactMatchConfig.model_validate(
        {"type": "exact_match", "target": target, "extract": "number", **cfg}
    )
    grader = ExactMatchGrader(config, GraderContext())
    return asyncio.run(grader.grade(answer, TASK, {}))


@pytest.mark.parametrize(
    "answer",
    [
        "72",
        " 72 ",
        "72.0",
        "$72",
        "$72.00",
        "The answer is 72.",
        "**72**",
        "72 apples",
        "I think 8*9 = 72",
        "\\boxed{72}",
        "The answer is 72 (from 8 and 9).",
    ],
)
def test_forms_models_write_are_correct(answer: str) -> None:
    assert grade(answer).outcome is Outcome.CORRECT


def test_thousands_separator() -> None:
    assert grade("1000", target="{{ big.split('####')[-1] }}").outcome is Outcome.CORRECT
    assert grade("1,000", target="{{ big.split('####')[-1] }}").outcome is Outcome.CORRECT


def test_wrong_and_ungradeable() -> None:
    assert grade("71").outcome is Outcome.INCORRECT
    g = grade("I don't know")
    assert g.outcome is Outcome.UNGRADEABLE and g.score is None


@pytest.mark.parametrize(
    ("text", "canon"), [("72.0", "72"), ("$1,000.50", "1000.5"), ("-3", "-3"), ("+4", "4"), ("abc", None)]
)
def test_canonical_number(text: str, canon: str | None) -> None:
    assert canonical_number(text) == canon


def test_extract_prefers_stated_answer() -> None:
    assert extract_number("The answer is 5. Check: 2+3=5, 10 total items") == "5"
