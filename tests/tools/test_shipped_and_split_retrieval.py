"""The shipped tool environment end to end in process, and retrieval over another split."""

from __future__ import annotations

from typing import Any

from envbuilder.environment import Environment, load_environment
from envbuilder.episode import Episode
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.tools.conftest import HERE


def _text(result: Any) -> str:
    return str(result.model_dump()["output"]["blocks"][0]["text"])


async def test_gsm8k_tools_hint_calculator_feedback_and_cost() -> None:
    env = load_environment(ENVS / "gsm8k_tools.yaml")
    episode = Episode(task=env.split("train").task(0))  # Natalia's clips: 48 + 24 = 72
    hint = _text(await env.call_tool(episode, "hint", {}))
    assert hint == "First step: Natalia sold 48/2 = <<48/2=24>>24 clips in May."
    # A first step that reaches the final answer (243) shows it hidden.
    reached = Episode(task=env.split("test").task(26))
    assert _text(await env.call_tool(reached, "hint", {})) == "First step: 3 * (16.50 + 22.50 + 42) = …"
    assert _text(await env.call_tool(episode, "calculator", {"expression": "48 + 48 / 2"})) == "72"
    wrong = await env.call_tool(episode, "submit", {"answer": "The answer is 70."})
    assert _text(wrong) == (
        "Incorrect: the number read from your answer was 70. Check your work; you have one more attempt."
    )
    right = (await env.call_tool(episode, "submit", {"answer": "72"})).model_dump()["output"]
    assert (right["blocks"][0]["text"], right["reward"], right["finished"]) == ("Correct!", 0.75, True)


SPLIT_SPEC = """
name: rivers
dataset:
  type: jsonl
  files: {test: data/qa.jsonl, corpus: data/corpus.jsonl}
splits:
  test: {}
  corpus: {type: train}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
tools:
  - type: retrieve
    name: search_rivers
    split: corpus
    text: "{{ title }}: {{ body }}"
    k: 2
"""


async def test_retrieve_over_another_split() -> None:
    env = Environment(parse_spec(SPLIT_SPEC, file="rivers.yaml", base_dir=HERE))
    episode = Episode(task=env.split("test").task(0))
    found = _text(await env.call_tool(episode, "search_rivers", {"query": "which river flows through Paris"}))
    assert found.startswith("[1] Seine: The Seine flows through Paris to the English Channel.")
    one = _text(await env.call_tool(episode, "search_rivers", {"query": "Berlin", "k": 1}))
    assert one == "[1] Spree: The Spree flows through Berlin."
