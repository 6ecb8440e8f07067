from __future__ import annotations

import sys

import pytest

from envbuilder.graders import GraderConfigError, Outcome
from tests.graders._util import grade, make

pytest.importorskip("math_verify")


@pytest.mark.parametrize(
    ("answer", "target", "outcome"),
    [
        ("So the answer is $\\boxed{\\frac{14}{3}}$.", "\\frac{14}{3}", Outcome.CORRECT),
        ("\\boxed{\\dfrac{14}{3}}", "\\frac{14}{3}", Outcome.CORRECT),
        ("The answer is $4\\frac{2}{3}$", "\\frac{14}{3}", Outcome.CORRECT),
        ("\\boxed{0.5}", "\\frac12", Outcome.CORRECT),
        ("$\\boxed{(0, 1]}$", "(0,1]", Outcome.CORRECT),
        (
            "\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}",
            "\\left( 3, \\frac{\\pi}{2} \\right)",
            Outcome.CORRECT,
        ),
        ("\\boxed{\\frac{13}{3}}", "\\frac{14}{3}", Outcome.INCORRECT),
        ("$\\boxed{[0, 1]}$", "(0,1]", Outcome.INCORRECT),
        ("I could not solve it", "\\frac{14}{3}", Outcome.UNGRADEABLE),
    ],
)
async def test_equivalence(answer: str, target: str, outcome: Outcome) -> None:
    g = make({"type": "math", "target": "{{ answer }}"})
    assert (await grade(g, answer, {"answer": target})).outcome is outcome
    await g.aclose()


async def test_math500_rows_graded_against_their_own_solutions() -> None:
    import pyarrow.parquet as pq

    from tests.conftest import FIXTURES

    path = FIXTURES / "math500/test-00000-of-00001.parquet"
    rows = pq.read_table(path).slice(0, 25).to_pylist()
    g = make({"type": "math", "target": "{{ answer }}"})
    assert g.blocking
    results = [await grade(g, row["solution"], row) for row in rows]
    correct = sum(r.outcome is Outcome.CORRECT for r in results)
    # Reference solutions end in \boxed{answer}: all but rare parser gaps must agree.
    assert correct >= 23, [(r.details, r.reason) for r in results if r.outcome is not Outcome.CORRECT]
    wrong = await grade(g, "\\boxed{12345}", rows[0])
    assert wrong.outcome is Outcome.INCORRECT


def test_missing_library_fails_at_load_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)
    with pytest.raises(GraderConfigError) as info:
        make({"type": "math", "target": "{{ answer }}"})
    assert "pip install math-verify" in str(info.value)


# Gold answers as MATH-500 writes them; each must meet itself in every form a model writes.
GOLDS = [
    "3\\sqrt{13}",
    "\\left( 3, \\frac{\\pi}{2} \\right)",
    "6 - 5i",
    "\\pi",
    "\\dfrac12",
    "\\frac{\\sqrt{3}}{3}",
    "(5,\\infty)",
    "\\$32,\\!348",
    "\\$18.90",
    "145^\\circ",
    "5.4 \\text{ cents}",
    "864 \\mbox{ inches}^2",
    "\\text{(C)}",
    "\\text{Evelyn}",
    "52_8",
    "10,\\!080",
    "\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}",
    "(-\\infty, 2) \\cup (3, \\infty)",
    "-13x+3",
    "025",
    "123456789012345678901234567890",
]


@pytest.mark.parametrize("gold", GOLDS)
async def test_the_gold_meets_itself_in_every_form(gold: str) -> None:
    g = make({"type": "math", "target": "{{ answer }}"})
    for form in ["{}", "${}$", "\\boxed{{{}}}", "The final answer is ${}$.", "{}."]:
        result = await grade(g, form.format(gold), {"answer": gold})
        assert result.outcome is Outcome.CORRECT, (form, result)


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("\\boxed{36}", "\\$36"),
        ("36 dollars", "\\$36"),
        ("32348", "\\$32,\\!348"),
        ("0.5", "\\dfrac12"),
        ("\\frac{1}{\\sqrt{3}}", "\\frac{\\sqrt{3}}{3}"),
        ("145 degrees", "145^\\circ"),
        ("5.4 cents", "5.4 \\text{ cents}"),
        ("C", "\\text{(C)}"),
        ("25", "025"),
        ("2.5e1", "25"),
        ("25/1", "25"),
        ("x = 5", "5"),
        ("**Answer:** 5", "5"),
        ("the answer is 5 because 5 > 3", "5"),
        ("The answer is 5, since 3+2=5.", "5"),
        ("The final answer is -2, 1; both roots check out.", "-2, 1"),
        ("1{,}000", "1000"),
        ("(5, ∞)", "(5,\\infty)"),
        ("\\left(\\begin{matrix}-2\\\\-14\\\\-7\\end{matrix}\\right)", GOLDS[16]),
    ],
)
async def test_harmless_variations_are_correct(answer: str, target: str) -> None:
    g = make({"type": "math", "target": "{{ answer }}"})
    result = await grade(g, answer, {"answer": target})
    assert result.outcome is Outcome.CORRECT, result


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("3", "3\\sqrt{13}"),  # a dropped factor
        ("\\sqrt{13}", "3\\sqrt{13}"),
        ("-3\\sqrt{13}", "3\\sqrt{13}"),  # a sign flip
        ("6 + 5i", "6 - 5i"),
        ("[5,\\infty)", "(5,\\infty)"),
        ("\\$37", "\\$36"),
        ("52_9", "52_8"),  # math-verify drops the base: 52_9 would equal 52_8
        ("(D)", "\\text{(C)}"),
        ("Navin", "\\text{Evelyn}"),
        ("123456789012345678901234567891", "123456789012345678901234567890"),
        ("0.33", "\\frac13"),
        ("(3, \\pi)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ],
)
async def test_wrong_answers_score_zero(answer: str, target: str) -> None:
    g = make({"type": "math", "target": "{{ answer }}"})
    result = await grade(g, answer, {"answer": target})
    assert result.outcome is Outcome.INCORRECT, result


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("\\frac{", "the answer '\\\\frac{' could not be read as mathematics"),
        ("\\boxed{}", "no answer could be found in the response"),
        ("I do not know", "the answer 'I do not know' could not be read as mathematics"),
    ],
)
async def test_unreadable_answers_are_ungradeable_with_the_reason(answer: str, reason: str) -> None:
    g = make({"type": "math", "target": "{{ answer }}"})
    result = await grade(g, answer, {"answer": "5"})
    assert (result.outcome, result.reason) == (Outcome.UNGRADEABLE, reason)


@pytest.mark.parametrize(
    "answer",
    ["\\boxed{" * 2500, "\\(" * 9000, "cm " * 6000 + "x", "1" * 19000, "$$a" * 6000, "x = " * 4000],
)
async def test_hostile_answers_are_read_in_linear_time(answer: str) -> None:
    # Each once took seconds to a minute (quadratic scans) or raised (int digits limit).
    g = make({"type": "math", "target": "{{ answer }}", "timeout": 5})
    result = await grade(g, answer, {"answer": "5"})
    assert result.outcome in (Outcome.INCORRECT, Outcome.UNGRADEABLE)
    assert "took over" not in result.reason


async def test_an_unreadable_target_is_not_quoted_in_the_reason() -> None:
    # The reason reaches the agent; the gold goes only into the `target` detail (hidden until
    # the spec reveals it)
    g = make({"type": "math", "target": "{{ answer }}"})
    result = await grade(g, "42", {"answer": "\\frac{secret-gold"})
    assert result.outcome is Outcome.UNGRADEABLE
    assert result.reason == "the task's target could not be read as mathematics"
    assert "secret" not in result.reason and result.details["target"] == "\\frac{secret-gold"
