"""The last stated answer wins, on one line or many; several different final answers are none.

One rule (``envbuilder.graders._answer``) for every text grader: the ``math`` grader reads the
final statement's value, ``exact_match`` (``extract: number``) its first number. The cases of
issue 32 first, exactly as reported, then the same kinds written other ways.
"""

from __future__ import annotations

import pytest

from envbuilder.graders import Grader, Outcome
from tests.graders._util import grade, make

pytest.importorskip("math_verify")

MATH = {"type": "math", "target": "{{ answer }}"}
NUMBER = {"type": "exact_match", "target": "{{ answer }}", "extract": "number"}
_GRADERS: dict[str, Grader] = {}


async def _score(kind: str, answer: str, gold: str) -> float | None:
    if kind not in _GRADERS:
        _GRADERS[kind] = make(MATH if kind == "math" else NUMBER)
    return (await grade(_GRADERS[kind], answer, {"answer": gold})).score


# (answer, gold, score): issue 32's reports, exactly.
ISSUE = [
    ("The answer is 42.\nWait, I made an error. The answer is 41.", "42", 0.0),
    ("The answer is 42.\nWait, I made an error. The answer is 41.", "41", 1.0),
    ("Answer: 41\nAnswer: 42", "42", 1.0),
    ("Answer: 41\nAnswer: 42", "41", 0.0),
    ("$17 \\bmod 5 = 2$", "2", 1.0),
    ("Natalia sold 48/2 = 24 clips in May.\n#### 42", "42", 1.0),
    ("#### 42", "42", 1.0),
]


@pytest.mark.parametrize(("answer", "gold", "score"), ISSUE)
async def test_issue_32_reports(answer: str, gold: str, score: float) -> None:
    assert await _score("math", answer, gold) == score
    if "bmod" not in answer:  # exact_match reads numbers, not operators
        assert await _score("exact_match", answer, gold) == score


# The issue's peer cases (Math-Verify and lighteval tables), as they are written there.
PEERS = [
    # A box straddling two math spans, then a phrase stating both values.
    (
        "…is located between $\\boxed{12 $ and $13 }. $ Final Answer: The final answer is "
        '\\"$12 $ and $13 $\\". I hope it is correct.',
        "so the sum is located between $\\boxed{12\\text{ and }13}$.",
        1.0,
    ),
    ("$\\boxed{1,2}$", "\\boxed{1} papers and \\boxed{2} bins", 1.0),
    (
        "For each divisor $n$, there corresponds a unique common difference $d = \\frac{90}{n}$. "
        "Therefore, there are 12 distinct arithmetic sequences that meet the three given conditions. "
        "I hope it is correct.",
        "$12$",
        1.0,
    ),
    ("$p=5,q=2;p=7,q=2$", "\\boxed{ p = 5, q = 2 \\quad \\text{and} \\quad p = 7, q = 2}", 1.0),
    ("$p=7,q=2;p=5,q=2$", "\\boxed{ p = 5, q = 2 \\quad \\text{and} \\quad p = 7, q = 2}", 1.0),
    ("$p=5,q=2;p=7,q=3$", "\\boxed{ p = 5, q = 2 \\quad \\text{and} \\quad p = 7, q = 2}", 0.0),
]


@pytest.mark.parametrize(("answer", "gold", "score"), PEERS)
async def test_issue_32_peer_forms(answer: str, gold: str, score: float) -> None:
    assert await _score("math", answer, gold) == score


# The same kinds, written other ways: (answer, gold, score) for both graders.
LAST_WINS = [
    ("Final answer: 41\n\nHmm, let me recheck.\n\nFinal answer: 42", "42", 1.0),
    ("#### 41\n#### 42", "41", 0.0),
    ("\\boxed{41}\n\nWait, that is wrong.\n\nThe answer is 42.", "42", 1.0),
    ("The answer is 42.\n\n**Verification:** 6 × 7 = 42 ✓", "42", 1.0),
    ("I first thought the answer is 41, but the answer is 42.", "42", 1.0),
    ("Answer: 42\nI double-checked: the answer is correct.", "42", 1.0),
    ("Answer:\n\n42", "42", 1.0),
    ("The answer is 42 (since 6 × 7 = 42).", "42", 1.0),
    ("<answer>41</answer> no, <answer>42</answer>", "42", 1.0),
    ("<think>The answer is 41.</think>\n<answer>42</answer>", "41", 0.0),
]
HEDGES = [
    ("The answer is 3\nor 4", "3"),
    ("The answer is $3$\nor $4$", "3"),
    ("The answer is\n$$3$$\nor\n$$4$$", "4"),
    ("The answer is $3$ or maybe $4$", "3"),
    ("The answer is 3. Or maybe 4.", "3"),
    ("Answer: 3 (or possibly 4)", "3"),
    ("\\boxed{3}\n\n\\boxed{4}", "4"),
    ("\\boxed{3 \\text{ or } 4}", "3"),
    ("The answer is 3.\nAlternatively, the answer is 4.", "4"),
    ("The answer is 3.\nIt could also be 4.", "3"),
    ("The answer could be 3. The answer could also be 4.", "4"),
    ("It is either 3 or 4.", "4"),
    ("Hence x = 3 or x = 4.", "4"),
    ("The answers are 3 and 4.", "4"),
]


@pytest.mark.parametrize("kind", ["math", "exact_match"])
@pytest.mark.parametrize(("answer", "gold", "score"), LAST_WINS)
async def test_the_last_stated_answer_wins(kind: str, answer: str, gold: str, score: float) -> None:
    assert await _score(kind, answer, gold) == score


@pytest.mark.parametrize("kind", ["math", "exact_match"])
@pytest.mark.parametrize(("answer", "gold"), HEDGES)
async def test_a_hedge_over_lines_is_no_answer(kind: str, answer: str, gold: str) -> None:
    assert not await _score(kind, answer, gold), "a hedge earned the reward"


async def test_a_hedge_equals_a_gold_that_lists_the_same_values() -> None:
    assert await _score("math", "The answer is $3$\nor $4$", "3, 4") == 1.0
    assert await _score("math", "$x = 3$ or $x = 4$", "\\{3, 4\\}") == 1.0
    assert await _score("math", "Hence x = 3 or x = 4.", "3, 4") == 1.0
    assert await _score("math", "The answers are 3 and 4.", "3, 4") == 1.0


# Operators and forms peers read: (answer, gold, score).
FORMS = [
    ("$17 \\bmod 5 = 2$", "2", 1.0),
    ("$17 \\bmod 5 = 3$", "2", 0.0),
    ("$17 \\mod 5 = 2$", "2", 1.0),
    ("$x \\equiv 2 \\pmod{5}$", "2", 1.0),
    ("$x \\equiv 2 \\pmod 5$.", "2", 1.0),
    ("$x \\equiv 2 \\ (\\mathrm{mod}\\ 5)$", "2", 1.0),
    ("$x \\equiv 3 \\pmod{5}$", "2", 0.0),
    ("$2^{10} = 1024$", "1024", 1.0),
    ("$2^{10} = 1024$", "1025", 0.0),
    ("$11a + c$", "$7 = 11a + c$", 0.0),  # an equation is not its right side
    ("$2x = 10 \\Rightarrow x = 5$", "5", 1.0),
    ("$\\therefore x = 5$", "5", 1.0),
    ("$f(x) = 2x + 1$", "2x+1", 1.0),
    ("[45 degrees]", "45", 1.0),
    ("185\\", "185", 1.0),
    ("The answer is $\\frac{1}{2}$ (or $0.5$).", "0.5", 1.0),  # one value, two ways
    ("Therefore, the minimum error increases by 100%.", "$100%$", 1.0),
]


@pytest.mark.parametrize(("answer", "gold", "score"), FORMS)
async def test_operators_and_forms(answer: str, gold: str, score: float) -> None:
    assert await _score("math", answer, gold) == score


async def test_a_hedge_is_incorrect_with_its_values_named() -> None:
    result = await grade(make(NUMBER), "The answer is 3.\nIt could also be 4.", {"answer": "3"})
    assert result.outcome is Outcome.INCORRECT
    assert result.details["extracted"] == "3, 4"
