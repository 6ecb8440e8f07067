"""What every grader shares: targets that can be slow to render are rendered off the loop."""

from __future__ import annotations

import pytest

from envbuilder.errors import TemplateError
from envbuilder.graders import GraderContext, Outcome, build_grader, grade_off_loop
from envbuilder.graders._exact import ExactMatchConfig
from envbuilder.templating import render_limits
from tests.loop import ticking

# Python per character of the question (3 s for 2.1M on this machine, 10 times the budget).
SLOW = "{{ answer if question | list | map('upper') | map('lower') | join else '' }}"


def _grader(target: str):  # type: ignore[no-untyped-def]
    with render_limits(0.3, None):
        return build_grader(ExactMatchConfig(type="exact_match", target=target), GraderContext())


async def test_a_slow_target_renders_off_the_loop_and_the_grade_is_the_same() -> None:
    grader = _grader(SLOW)
    assert [t.name for t in grader.slow_targets()] == ["grader.target[0]"]
    task = {"question": "ab", "answer": "7"}
    assert (await grade_off_loop(grader, "7", task, {})).outcome is Outcome.CORRECT
    assert (await grade_off_loop(grader, "8", task, {})).outcome is Outcome.INCORRECT

    async with ticking(0.005) as ticks:
        with pytest.raises(TemplateError) as info:  # the episode makes it ungradeable, with the reason
            await grade_off_loop(grader, "7", {"question": "ab " * 700_000, "answer": "7"}, {})
    # The render ran past its budget in a render process; the loop kept running meanwhile.
    assert info.value.code == "template_budget"
    assert ticks[0] >= 20


def test_targets_that_show_fields_stay_on_the_loop() -> None:
    assert _grader("{{ answer.split('####')[-1] }}").slow_targets() == []
