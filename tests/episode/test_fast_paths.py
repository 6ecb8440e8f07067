"""The episode's cheap paths give what the general ones give: the answer read without the input
model, the grading context without a trajectory for graders that cannot read one, an output's
text without a join, a graded answer's reply before it is the wire's model."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.episode import (
    GOLD_DETAILS,
    Episode,
    GradeCounts,
    Reply,
    SubmitTool,
    output_of,
    reward_of,
    without_gold,
)
from envbuilder.episode.toolbox import _record
from envbuilder.graders import TRAJECTORY, Grade, Grader, Outcome, Trajectory
from envbuilder.graders._actions import ActionsConfig
from envbuilder.inprocess import text_of
from envbuilder.protocol import ImageBlock, RunToolError, TextBlock, ToolOutput
from envbuilder.spec import SubmitSpec
from tests.graders._util import make

EXACT = {"type": "exact_match", "target": "{{ answer }}"}


class _Plugin(Grader):
    """A grader that says nothing about what it reads (a third-party plugin)."""

    Config = ActionsConfig

    async def grade(self, answer: str, task: dict[str, Any], secrets: dict[str, str]) -> Grade:
        return Grade.correct("ok")


@pytest.mark.parametrize(
    "tool_input",
    [
        {"answer": "72"},
        {"answer": ""},
        {"answer": "x" * 10},
        {"answer": "x" * 11},
        {"answer": "72", "extra": 1},
        {"answer": 72},
        {"answer": None},
        {"answer": b"72"},
        {"answer": ["72"]},
        {},
        {"other": "72"},
    ],
)
def test_the_answer_is_read_as_the_input_model_reads_it(tool_input: dict[str, Any]) -> None:
    tool = SubmitTool(SubmitSpec(max_answer_chars=10), make(EXACT))
    fast = tool.answer_of(tool_input)
    try:
        slow: str | RunToolError = str(tool.input_model.model_validate(tool_input).answer)  # type: ignore[attr-defined]
    except Exception:
        slow = "refused"
    if isinstance(fast, RunToolError):
        assert slow == "refused" and fast.reason == "input_validation"
    else:
        assert fast == slow and type(fast) is str


def _context(grader: Grader) -> dict[str, Any]:
    tool = SubmitTool(SubmitSpec(), grader)
    tool.trajectory_of = lambda episode, message, reply: Trajectory(messages=[message or ""])
    episode = Episode({"answer": "72"})
    context = tool.context(episode, "72")
    if TRAJECTORY not in context:
        assert context is episode.task  # the row itself, not a copy
    return context


def test_the_trajectory_is_built_only_for_graders_that_may_read_it() -> None:
    assert TRAJECTORY not in _context(make(EXACT))
    assert TRAJECTORY not in _context(make({"type": "regex", "pattern": "{{ answer }}"}))
    reads = make({"type": "exact_match", "target": "{{ answer }}{{ trajectory.messages[0] }}"})
    assert _context(reads)[TRAJECTORY].messages == ["72"]
    composite = make({"type": "all", "graders": [EXACT, {"type": "actions"}]})
    assert _context(composite)[TRAJECTORY].messages == ["72"]
    assert TRAJECTORY not in _context(make({"type": "any", "graders": [EXACT, EXACT]}))
    plugin = _Plugin(ActionsConfig(type="actions"), make(EXACT).context)
    assert _context(plugin)[TRAJECTORY].messages == ["72"]


@pytest.mark.parametrize(
    "blocks",
    [
        [TextBlock(text="a")],
        [TextBlock(text="")],
        [],
        [TextBlock(text="a"), TextBlock(text="b")],
        [ImageBlock(data="eA==", mimeType="image/png")],
        [TextBlock(text="a"), TextBlock(text="")],
    ],
)
def test_an_output_s_text_is_its_text_blocks_joined(blocks: list[Any]) -> None:
    assert text_of(blocks) == "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text)
    output = ToolOutput(blocks=blocks)
    episode = Episode({})
    _record(episode, "submit", {}, output)
    assert episode.transcript[-1]["output"] == "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


@pytest.mark.parametrize(
    ("text", "metadata", "reward", "finished"),
    [
        ("Correct!", {"outcome": "correct", "score": 1.0}, 1.0, True),
        (
            "Incorrect. 2 attempts left.",
            {"outcome": "incorrect", "attempt_reward": 0.0},
            None,
            False,
        ),
        ("", {}, None, True),
        ("Error: x", {"error": "x", "void": "the judge is down"}, None, True),
    ],
)
def test_a_reply_is_the_wire_s_one_text_output(
    text: str, metadata: dict[str, Any], reward: float | None, finished: bool
) -> None:
    reply = Reply(text, metadata, reward, finished)
    expected = ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward, finished=finished)
    assert reply.output() == expected == output_of(reply)
    assert reply.output().model_dump_json() == expected.model_dump_json()
    assert reply == Reply(text, dict(metadata), reward, finished)
    assert reply != Reply(text + "!", metadata, reward, finished) and reply != expected
    episode = Episode({})
    _record(episode, "submit", {}, reply)
    _record(episode, "submit", {}, expected)
    assert episode.transcript[0] | {"id": ""} == episode.transcript[1] | {"id": ""}
    error = RunToolError(error="no")
    assert output_of(expected) is expected and output_of(error) is error  # (the rest as they are)
    assert reward_of(reply) == reward_of(expected) == reward and reward_of(error) is None


@pytest.mark.parametrize(
    "details",
    [
        {"extracted": "72", "target": "72"},
        {"score": 0.5, "pattern": "x", "nested": {"target": 1, "kept": 2}, "runs": [1]},
        {"parts": [{"diff": "d", "ok": True}, "plain"], "reasoning": "gold"},
        {},
    ],
)
def test_the_gold_left_out_into_a_dict_is_the_gold_left_out_added_to_it(details: dict[str, Any]) -> None:
    before = {"outcome": "correct", "score": 1.0}
    into = dict(before)
    assert without_gold(details, into) is into
    assert into == {**before, **without_gold(details)}
    assert not GOLD_DETAILS & _keys(into)  # (nested ones too)


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    return set().union(*(_keys(v) for v in value)) if isinstance(value, list) else set()


def test_grade_counts_count_by_outcome() -> None:
    counts = GradeCounts()
    for outcome in (Outcome.CORRECT, Outcome.CORRECT, Outcome.INCORRECT, Outcome.UNGRADEABLE):
        counts.add(outcome)
    assert counts.as_dict() == {"correct": 2, "incorrect": 1, "ungradeable": 1}
    assert (counts.total, counts.ungradeable) == (4, 1)
