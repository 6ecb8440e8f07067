"""The ``unit_tests`` grader over real bubblewrap: layouts, extraction, scores and failures."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from envbuilder.episode import Episode, SubmitTool
from envbuilder.graders import Outcome
from envbuilder.graders._code import extract_code, fenced_blocks
from envbuilder.protocol import RunToolSuccess, ToolOutput
from envbuilder.spec import SubmitSpec
from tests.graders._util import grade, make

HUMANEVAL = {
    "type": "unit_tests",
    "program": "{{ prompt }}{{ answer }}\n\n{{ test }}\n\ncheck({{ entry_point }})\n",
    "reference": "{{ canonical_solution }}",
    "limits": {"wall_seconds": 5, "cpu_seconds": 5},
}
TASK = {
    "prompt": 'def add(a, b):\n    """Add two numbers."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(f):\n    assert f(1, 2) == 3\n    assert f(-1, 1) == 0\n",
    "entry_point": "add",
}
MBPP_TASK = {
    "test_setup_code": "",
    "test_list": ["assert double(2) == 4", "assert double(0) == 0", "assert double(-3) == -6"],
}


async def test_humaneval_layout_body_or_whole_function() -> None:
    grader = make(HUMANEVAL)
    assert grader.blocking and grader.fields == {"prompt", "test", "entry_point", "canonical_solution"}
    assert grader.target(TASK) == "    return a + b\n"
    body = await grade(grader, "    return a + b\n", TASK)
    assert (body.outcome, body.score, body.reason) == (Outcome.CORRECT, 1.0, "the tests passed")
    whole = await grade(grader, "Sure:\n```python\ndef add(a, b):\n    return b + a\n```\nIt adds.", TASK)
    assert whole.score == 1.0
    wrong = await grade(grader, "    return a - b\n", TASK)
    assert wrong.outcome is Outcome.INCORRECT and wrong.reason.endswith("AssertionError")
    assert wrong.details["run"]["status"] == "exit" and "Traceback" in wrong.details["run"]["stderr"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("    return (a +\n", "SyntaxError"),
        ("    raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("    import time\n    time.sleep(60)\n", "timeout"),
    ],
)
async def test_crashes_and_timeouts_are_graded_zero_with_the_reason(answer: str, reason: str) -> None:
    limits = {"wall_seconds": 1.5, "cpu_seconds": 1}
    result = await grade(make({**HUMANEVAL, "limits": limits}), answer, TASK)
    assert (result.outcome, result.score) == (Outcome.INCORRECT, 0.0)
    assert reason in result.reason


async def test_mbpp_layout_all_or_a_fraction_of_separable_asserts() -> None:
    together = make(
        {
            "type": "unit_tests",
            "program": "{{ answer }}\n\n{{ test_setup_code }}\n{% for t in test_list %}{{ t }}\n{% endfor %}",
        }
    )
    half_right = "def double(x):\n    return x * 2 if x >= 0 else x\n"
    assert (await grade(together, half_right, MBPP_TASK)).score == 0.0
    apart = make(
        {
            "type": "unit_tests",
            "cases": "test_list",
            "program": "{{ answer }}\n\n{{ test_setup_code }}\n{{ case }}\n",
            "score": "fraction",
        }
    )
    assert apart.fields == {"test_list", "test_setup_code"}
    result = await grade(apart, half_right, MBPP_TASK)
    assert result.outcome is Outcome.CORRECT and result.score == pytest.approx(2 / 3)
    assert result.reason.startswith("2 of 3 tests passed; first failure:")
    assert [r["status"] for r in result.details["runs"]] == ["ok", "ok", "exit"]
    assert (await grade(apart, "def double(x):\n    return 2 * x\n", MBPP_TASK)).score == 1.0


async def test_the_language_is_a_command() -> None:
    grader = make(
        {
            "type": "unit_tests",
            "program": '{{ answer }}\n[ "$(f 3)" = 9 ]\n',
            "file": "t.sh",
            "command": ["bash", "t.sh"],
            "languages": ["bash", "sh"],
        }
    )
    assert (await grade(grader, "```bash\nf() { echo $(( $1 * $1 )); }\n```", {})).score == 1.0
    assert (await grade(grader, "```sh\nf() { echo $1; }\n```", {})).score == 0.0


async def test_what_cannot_be_run_is_ungradeable() -> None:
    fenced = make({**HUMANEVAL, "extract": "fenced"})
    result = await grade(fenced, "    return a + b\n", TASK)
    assert result.outcome is Outcome.UNGRADEABLE and "no code block" in result.reason
    missing = make({**HUMANEVAL, "command": ["no-such-python", "main.py"]})
    result = await grade(missing, "    return a + b\n", TASK)
    assert result.outcome is Outcome.UNGRADEABLE and result.score is None
    assert "'no-such-python' is not in the sandbox" in result.reason
    long = await grade(make({**HUMANEVAL, "max_answer_chars": 10}), "    return a + b\n", TASK)
    assert long.outcome is Outcome.UNGRADEABLE


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match="give one of `program` or `program_file`"):
        make({"type": "unit_tests"})
    with pytest.raises(ValidationError, match="`score: fraction` needs `cases`"):
        make({"type": "unit_tests", "program": "x", "score": "fraction"})
    with pytest.raises(ValidationError, match="memory_mb"):
        make({"type": "unit_tests", "program": "x", "limits": {"memory_mb": 1}})


def test_fenced_code_extraction() -> None:
    text = "Intro\n```text\nnot code\n```\n```Python  title\ndef f():\n    return 1\n```\n~~~\nother\n~~~"
    assert [b.language for b in fenced_blocks(text)] == ["text", "python", ""]
    assert extract_code(text, ["python"]) == "def f():\n    return 1"
    assert extract_code("```\nx = 1\n```", ["python"]) == "x = 1"
    assert extract_code("```js\nx\n```", ["python"]) is None
    assert extract_code("x = 1", ["python"]) == "x = 1"
    assert extract_code("x = 1", ["python"], require_fence=True) is None
    assert extract_code("````python\n```\ninner\n```\n````", ["python"]) == "```\ninner\n```"
    assert extract_code("```python\nunclosed = 1\n", ["python"]) == "unclosed = 1"


async def test_per_case_runs_reach_no_unfinished_episode() -> None:
    """A `cases` grade's runs hold each case's output, and a traceback quotes the hidden test's
    line: gold details, which an episode sees only once it has finished (with reveal_answer)."""
    grader = make({"type": "unit_tests", "cases": "test_list", "program": "{{ answer }}\n\n{{ case }}\n"})
    task = {"test_list": ["assert double(2) == 4  # SECRET_CASE", "assert double(-3) == -6  # SECRET_CASE"]}
    tool = SubmitTool(SubmitSpec(max_attempts=2, reveal_answer=True), grader)
    episode = Episode(task)

    async def submit(answer: str) -> ToolOutput:
        result = await tool.call(episode, "submit", {"answer": answer})
        assert isinstance(result, RunToolSuccess), result
        return result.output

    first = await submit("def double(x):\n    return x + 2\n")
    assert not first.finished and first.metadata["outcome"] == "incorrect"
    assert "runs" not in first.metadata and "run" not in first.metadata, first.metadata
    assert "SECRET_CASE" not in json.dumps(first.model_dump(mode="json"))
    assert first.metadata["passed"] == 1 and first.metadata["total"] == 2  # the counts are not gold
    last = await submit("def double(x):\n    return x + 3\n")
    assert last.finished  # the episode is over and reveal_answer is set: now the runs are shown
    assert [r["status"] for r in last.metadata["runs"]] == ["exit", "exit"]
    assert "SECRET_CASE" in json.dumps(last.metadata["runs"])
