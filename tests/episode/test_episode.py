"""The submit tool: attempts and feedback, rewards, the ungradeable policy and its counts."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.episode import Episode, SubmitTool
from envbuilder.protocol import RunToolError, RunToolSuccess, ToolOutput
from envbuilder.spec import SubmitSpec
from tests.graders._util import make

TASK = {"answer": "#### 72"}
GRADER = {"type": "exact_match", "target": "{{ answer.split('####')[-1] }}", "extract": "number"}


def tool(**spec: Any) -> SubmitTool:
    return SubmitTool(SubmitSpec(**spec), make(GRADER))


async def submit(t: SubmitTool, ep: Episode, answer: str) -> ToolOutput:
    result = await t.call(ep, t.spec.name, {t.spec.answer_field: answer})
    assert isinstance(result, RunToolSuccess), result
    return result.output


def text(out: ToolOutput) -> str:
    return out.blocks[0].text  # type: ignore[union-attr]


async def test_name_description_parameter_and_rewards_are_configurable() -> None:
    t = tool(
        name="final_answer",
        description="Give the number.",
        answer_field="value",
        reward_correct=10,
        reward_incorrect=-1,
    )
    assert t.tool_spec.name == "final_answer" and t.tool_spec.description == "Give the number."
    assert list(t.tool_spec.input_schema["properties"]) == ["value"]
    out = await submit(t, Episode(TASK), "71")
    assert (out.reward, out.finished, text(out)) == (-1, True, "Incorrect.")
    out = await submit(t, Episode(TASK), "72")
    assert (out.reward, out.finished, text(out)) == (10, True, "Correct!")


async def test_attempts_with_feedback_then_reveal() -> None:
    t = tool(max_attempts=3, reveal_answer=True)
    ep = Episode(TASK)
    first = await submit(t, ep, "70")
    assert (text(first), first.finished, first.metadata["attempt"]) == (
        "Incorrect. You have 2 attempts left.",
        False,
        1,
    )
    second = await submit(t, ep, "71")
    assert text(second) == "Incorrect. You have 1 attempt left."
    last = await submit(t, ep, "73")
    assert last.finished and text(last) == "Incorrect. The correct answer is 72."
    after = await t.call(ep, "submit", {"answer": "72"})
    assert isinstance(after, RunToolError) and after.reason == "episode_finished"


async def test_correct_ends_early_and_answer_not_revealed_by_default() -> None:
    t = tool(max_attempts=3)
    ep = Episode(TASK)
    assert text(await submit(t, ep, "1")) == "Incorrect. You have 2 attempts left."
    out = await submit(t, ep, "$72")
    assert out.finished and out.reward == 1.0
    t2 = tool()
    assert "72" not in text(await submit(t2, Episode(TASK), "5"))


async def test_ungradeable_default_is_null_reward_with_reason_and_counted() -> None:
    t = tool(max_attempts=2)
    ep = Episode(TASK)
    out = await submit(t, ep, "no idea")
    assert out.reward is None and not out.finished
    assert text(out) == (
        "Your answer could not be graded: no answer could be extracted from the response. "
        "You have 1 attempt left."
    )
    assert out.metadata["outcome"] == "ungradeable"
    assert out.metadata["ungradeable_policy"] == "no_reward"
    assert out.metadata["ungradeable_count"] == 1
    await submit(t, ep, "72")
    assert t.counts.as_dict() == {"correct": 1, "incorrect": 0, "ungradeable": 1}


async def test_ungradeable_scored_as_incorrect() -> None:
    t = tool(on_ungradeable="incorrect", reward_incorrect=-0.5)
    out = await submit(t, Episode(TASK), "no idea")
    assert (out.reward, out.finished) == (-0.5, True)
    assert text(out).endswith("so it counts as incorrect.")
    assert out.metadata["outcome"] == "ungradeable" and out.metadata["ungradeable_policy"] == "incorrect"


async def test_ungradeable_retry_does_not_count_the_attempt_but_is_bounded() -> None:
    t = tool(on_ungradeable="retry", max_attempts=1)
    ep = Episode(TASK)
    out = await submit(t, ep, "no idea")
    assert (out.reward, out.finished, ep.attempts) == (None, False, 0)
    assert "This attempt was not counted" in text(out)
    # After max_attempts uncounted retries, an ungradeable answer counts (no endless loop).
    out = await submit(t, ep, "still no idea")
    assert (out.reward, out.finished, ep.attempts) == (None, True, 1)
    assert out.metadata["ungradeable_policy"] == "no_reward"
    assert Episode.from_dict(ep.to_dict()) == ep


async def test_long_answer_is_invalid_input_without_echo() -> None:
    t = tool(max_answer_chars=10)
    result = await t.call(Episode(TASK), "submit", {"answer": "9" * 11 + "SECRETISH"})
    assert isinstance(result, RunToolError) and result.reason == "input_validation"
    assert "SECRETISH" not in result.error


async def test_grader_crash_is_ungradeable_not_zero(caplog: pytest.LogCaptureFixture) -> None:
    t = tool()

    async def boom(answer: str, task: Any, secrets: Any) -> Any:
        raise RuntimeError("bug")

    t.grader.grade = boom  # type: ignore[method-assign]
    out = await submit(t, Episode(TASK), "72")
    assert out.reward is None and "the grader failed: RuntimeError" in text(out)
    assert t.counts.ungradeable == 1


async def test_only_the_final_attempt_carries_the_reward_costs_included() -> None:
    """The one reward convention: an open attempt's reward is in metadata, the final one is the
    episode's (less the episode's costs), so sum and last non-null agree."""
    t = tool(max_attempts=3, reward_incorrect=-1.0)
    ep = Episode(TASK, cost=0.25)
    first = await submit(t, ep, "70")
    assert (first.reward, first.metadata["attempt_reward"], first.finished) == (None, -1.0, False)
    last = await submit(t, ep, "72")
    assert (last.reward, last.metadata["cost"], last.finished) == (0.75, 0.25, True)
    assert "attempt_reward" not in last.metadata
