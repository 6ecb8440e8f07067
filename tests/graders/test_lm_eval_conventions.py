"""``exact_match`` and ``choice`` against lm-evaluation-harness's extraction conventions, and
hedges (several different final answers) scoring 0 in every text grader.

lm-evaluation-harness's GSM8K ``strict-match`` reads ``#### <number>``; its ``flexible-extract``
the last number of the response; MMLU's CoT prompts end "The answer is (B)". ``exact_match``
with ``extract: number`` accepts both of GSM8K's forms (the number after the last answer marker,
else the last number), and ``choice`` accepts MMLU's.
"""

from __future__ import annotations

import pytest

from envbuilder.graders import Outcome
from tests.graders._util import grade, make

GSM8K = {"type": "exact_match", "target": "{{ answer.split('####')[-1] }}", "extract": "number"}
TASK = {"answer": "Natalia sold 48/2 = 24 clips in May.\n#### 72"}


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("She sold 48 + 24 = 72 clips.\n#### 72", 1.0),  # strict-match's form
        ("48/2 = 24, and 48 + 24 = 72", 1.0),  # flexible-extract: the last number
        ("The answer is 72.", 1.0),  # the CoT few-shot form
        ("The answer is $72.", 1.0),
        ("#### 72.00", 1.0),
        ("The answer is 72. (Check: 72 - 2 = 70.)", 1.0),  # the stated answer, not the last number
        ("#### 71", 0.0),
        ("The answer is 72 or 73.", 0.0),  # a hedge
        ("\\boxed{71} \\boxed{72}", 0.0),  # a hedge across boxes
        ("\\boxed{71}. Wait, that is wrong: \\boxed{72}", 1.0),  # a correction: the last one
    ],
)
async def test_gsm8k_strict_and_flexible_forms(answer: str, score: float) -> None:
    result = await grade(make(GSM8K), answer, TASK)
    assert result.score == score, result


MMLU = {"type": "choice", "target": "{{ answer }}", "choices_field": "choices"}
MMLU_TASK = {"answer": 1, "choices": ["10", "20", "30", "40"]}


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("Let's think step by step. ... The answer is (B).", Outcome.CORRECT),
        ("The answer is B", Outcome.CORRECT),
        ("(B) 20", Outcome.CORRECT),
        ("\\boxed{B}", Outcome.CORRECT),
        ("The answer is (C).", Outcome.INCORRECT),
        ("A B C D", Outcome.INCORRECT),
        ("(A) (B)", Outcome.INCORRECT),
        ("\\boxed{A} \\boxed{B}", Outcome.INCORRECT),
    ],
)
async def test_mmlu_the_answer_is_b(answer: str, outcome: Outcome) -> None:
    grader = make({**MMLU, "index_base": 0})
    result = await grade(grader, answer, MMLU_TASK)
    assert result.outcome is outcome, result
