"""Dialogues that unfold: later turns from templates or a column, per-turn or end grading, and
the episode's reward (last, mean, min, or a grader over the transcript)."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec
from tests.tools.conftest import HERE

BASE = """
name: chat
dataset: {type: jsonl, files: {test: data/qa.jsonl}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: regex, pattern: "{{ answer }}", flags: [ignorecase]}
"""


def _env(extra: str) -> Environment:
    return Environment(parse_spec(BASE + extra, file="chat.yaml", base_dir=HERE))


async def _play(env: Environment, replies: list[str]) -> list[dict[str, Any]]:
    episode = Episode(task=env.split("test").task(0))
    return [(await env.call_tool(episode, "submit", {"answer": r})).model_dump()["output"] for r in replies]


async def test_template_turns_see_the_replies_and_end_grading_sees_the_dialogue() -> None:
    env = _env(
        """
dialogue:
  turns:
    - "You said: {{ replies[0] }}. Are you sure?"
    - "Last chance: one word."
  grade: end
  reward: grader
  transcript_grader: {type: regex, pattern: "Assistant: Paris\\\\s+User: .*Are you sure"}
"""
    )
    first, second, third = await _play(env, ["Paris", "Yes, Paris.", "Paris"])
    assert first["blocks"][0]["text"] == "You said: Paris. Are you sure?"
    assert (first["reward"], first["finished"], first["metadata"]) == (None, False, {"turn": 0, "turns": 3})
    assert second["blocks"][0]["text"] == "Last chance: one word."
    assert third["finished"] and third["reward"] == 1.0
    assert third["metadata"]["scores"] == [1.0]  # only the last reply is graded
    assert third["metadata"]["transcript_grade"]["outcome"] == "correct"


@pytest.mark.parametrize(("reward", "expected"), [("last", 1.0), ("mean", 0.5), ("min", 0.0)])
async def test_per_turn_grading_and_the_episode_reward(reward: str, expected: float) -> None:
    env = _env(f"dialogue: {{turns: ['Again?'], grade: each, reward: {reward}}}\n")
    first, second = await _play(env, ["Lyon", "Paris"])
    assert first["metadata"]["score"] == 0.0 and first["reward"] is None
    assert (first["metadata"]["turn_reward"], second["metadata"]["turn_reward"]) == (0.0, 1.0)
    assert second["reward"] == expected and second["metadata"]["scores"] == [0.0, 1.0]


async def test_an_ungradeable_reply_makes_the_mean_ungradeable() -> None:
    env_text = BASE.replace(
        'grader: {type: regex, pattern: "{{ answer }}", flags: [ignorecase]}',
        "grader: {type: exact_match, target: '{{ answer }}', extract: number}",
    )
    env = Environment(
        parse_spec(env_text + "dialogue: {turns: ['Again?'], grade: each, reward: mean}\n", base_dir=HERE)
    )
    episode = Episode(task=env.split("test").task(1))
    await env.call_tool(episode, "submit", {"answer": "no number here"})
    last = (await env.call_tool(episode, "submit", {"answer": "8"})).model_dump()["output"]
    assert (last["reward"], last["finished"]) == (None, True)
    assert last["metadata"]["scores"] == [None, 1.0]
    assert last["blocks"][0]["text"] == "The dialogue is over, but it could not be graded."


def test_dialogue_errors_are_located() -> None:
    with pytest.raises(SpecError) as info:
        _env("dialogue: {turns: ['x'], grade: end, reward: mean}\n")
    assert str(info.value) == (
        "chat.yaml:7:11 dialogue: `reward: mean` needs `grade: each` (one score per reply)"
    )
    with pytest.raises(SpecError) as info:
        _env("dialogue: {column: turns, turns: ['{{ nope }}']}\nsubmit: {max_attempts: 3}\n")
    assert "give exactly one of `column` or `turns`" in str(info.value)
    with pytest.raises(SpecError) as info:
        _env("dialogue: {turns: ['{{ nope }}']}\nsubmit: {max_attempts: 3, on_ungradeable: retry}\n")
    assert str(info.value).splitlines() == [
        "chat.yaml:8:24 submit.max_attempts: a dialogue takes one reply per user turn, so `max_attempts` "
        "must be 1. Remove `submit.max_attempts` or the `dialogue:` block",
        "chat.yaml:8:43 submit.on_ungradeable: `retry` is not available in a dialogue (a reply cannot be "
        "taken back). Use `no_reward` or `incorrect`",
        "chat.yaml:7:20 dialogue.turns[0]: the template uses 'nope', which the tasks lack "
        "Did you mean 'note'?",
    ]
