"""`envbuilder preview`: real tasks rendered as the model sees them, tools and targets."""

from __future__ import annotations

import base64

from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.cli._preview import _block
from envbuilder.protocol import ImageBlock, TextBlock, ToolCallBlock
from tests.conftest import ENVS

runner = CliRunner()

TOOLS = """\
gsm8k: train 7,473 / test 1,319 tasks

Tools
  submit: Submit your final answer to the math problem (a number).
    answer (string, required): The final numeric answer, e.g. 72.
"""


def test_preview_shows_tools_prompt_and_target() -> None:
    result = runner.invoke(app, ["preview", str(ENVS / "gsm8k.yaml"), "--index", "0"])
    assert result.exit_code == 0, result.output
    assert result.output == TOOLS + (
        "\n── train[0]  id train-0 ──\n"
        "[user]\n"
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May."
        " How many clips did Natalia sell altogether in April and May?\n"
        "\n"
        "Solve the problem step by step. When you are done, call the `submit` tool with your final"
        " answer as a number.\n"
        "[target] 72\n"
    )


def test_preview_n_tasks_of_a_split_with_a_system_prompt() -> None:
    result = runner.invoke(app, ["preview", str(ENVS / "gsm8k_cot.yaml"), "--split", "test", "-n", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.count("[system]\nYou are a careful math tutor.") == 2
    assert "── test[0]  id test-0 ──" in result.output and "── test[1]  id test-1 ──" in result.output
    assert "[target] 18\n" in result.output and "[target] 3\n" in result.output


def test_preview_bad_usage_exits_2() -> None:
    spec = str(ENVS / "gsm8k.yaml")
    assert runner.invoke(app, ["preview", spec, "--split", "dev"]).exit_code == 2
    assert runner.invoke(app, ["preview", spec, "--index", "99999"]).exit_code == 2
    assert runner.invoke(app, ["preview", spec, "-n", "2", "--index", "1"]).exit_code == 2


def test_blocks_render_as_lines() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 1225).decode()
    assert _block(ImageBlock(data=png, mimeType="image/png")) == ["[image image/png, 1.2 KB]"]
    assert _block(TextBlock(text="a\nb")) == ["a", "b"]
    call = ToolCallBlock(id="c1", name="submit", input={"answer": "72"})
    assert _block(call) == ['[tool call submit] {"answer": "72"}']


def test_preview_shows_a_dialogues_later_turns_and_each_replys_target() -> None:
    result = runner.invoke(app, ["preview", str(ENVS / "mt_bench.yaml"), "--index", "20"])
    assert result.exit_code == 0, result.output
    assert result.output.endswith(
        "── test[20]  id 101 ──\n"
        "[user]\n"
        "Imagine you are participating in a race with a group of people. If you have just overtaken the"
        " second person, what's your current position? Where is the person you just overtook?\n"
        "[user, revealed by reply 1]\n"
        'If the "second person" is changed to "last person" in the above question, what would the'
        " answer be?\n"
        "[dialogue] grade each, episode reward: mean\n"
        "[target, reply 1] You are in second place.\n"
        "[target, reply 2] Uncertain.\n"
    )


def test_preview_shows_each_tools_terms() -> None:
    result = runner.invoke(app, ["preview", str(ENVS / "gsm8k_tools.yaml"), "--index", "0"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[5].startswith("  calculator (calculator; at most 20 calls): Evaluate an arithmetic")
    assert lines[6] == "    expression (string, required): The arithmetic expression to evaluate."
    assert lines[7] == (
        "  hint (template; at most 1 call; costs 0.25 reward a call): Show the first step of a worked"
        " solution (any number that is the final answer hidden). Costs 0.25 of the reward; once per"
        " episode."
    )
