"""The episode's cheap paths give what the general ones give: the answer read without the input
model, the grading context without a trajectory for graders that cannot read one, an output's
text without a join."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.episode import Episode, SubmitTool
from envbuilder.episode.toolbox import _record
from envbuilder.graders import TRAJECTORY, Grade, Grader, Trajectory
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
