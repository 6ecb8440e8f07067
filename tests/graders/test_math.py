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
    assert "pip install 'envbuilder[math]'" in str(info.value)
