"""Few-shot examples: first N or a seeded sample, as turns or inline, never the task being asked."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.errors import SpecError
from tests.conftest import ENVS

MakeEnv = Callable[..., Environment]

MMLU = ENVS / "data/mmlu_stem"


def _spec(few_shot: str) -> str:
    return f"""\
name: fs
dataset:
  type: parquet
  files: {{test: {MMLU / "test-00000-of-00001.parquet"}, dev: {MMLU / "dev-00000-of-00001.parquet"}}}
splits:
  test: {{}}
  dev: {{type: validation}}
prompt:
  template: "Q: {{{{ question }}}}"
  few_shot: {few_shot}
grader: {{type: exact_match, target: "{{{{ answer | letter }}}}"}}
"""


def _questions(env: Environment, task: dict) -> list[str]:
    return [m.blocks[0].text for m in env.messages(task) if m.role == "user"]


@pytest.fixture(scope="module")
def mmlu() -> Environment:
    return load_environment(ENVS / "mmlu_stem.yaml")


def test_mmlu_inline_examples_are_the_first_dev_questions(mmlu: Environment) -> None:
    dev = mmlu.split("dev")
    task = mmlu.split("test").task(0)
    [message] = mmlu.messages(task)
    [block] = message.blocks
    parts = block.text.split("\n\n")
    assert block.text.startswith(dev.task(0)["question"] + "\n\n")
    for i in range(3):
        letter = "ABCD"[dev.task(i)["answer"]]
        assert f"{dev.task(i)['question']}\n\nA. " in block.text
        assert f"Answer: {letter}" in block.text
    assert dev.task(3)["question"] not in block.text
    assert parts[-1].startswith("Call the `submit` tool")
    assert mmlu.prompt(task) == [block]  # one plain user message: /prompt is verbatim


@pytest.mark.parametrize("index", range(10))
def test_a_dev_task_never_sees_itself(mmlu: Environment, index: int) -> None:
    dev = mmlu.split("dev")
    task = dev.task(index)
    text = mmlu.messages(task)[0].blocks[0].text
    examples = text.split("Call the `submit` tool")[0]
    assert examples.count("Answer: ") == 3
    assert examples.count(task["question"]) == 1  # only as the question asked, at the end
    as_spec = {**task}  # the same task sent by a client as task_spec
    assert mmlu.messages(as_spec)[0].blocks[0].text == text


def test_turns_style_and_seeded_random(make_env: MakeEnv) -> None:
    env = make_env(_spec("{split: dev, n: 2, select: random, seed: 7, answer: '{{ answer | letter }}'}"))
    dev = env.split("dev")
    task = env.split("test").task(5)
    messages = env.messages(task)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    shown = [m.blocks[0].text for m in messages]
    import random

    picks = sorted(random.Random(7).sample(range(10), 3))[:2]
    assert shown[0] == f"Q: {dev.task(picks[0])['question']}"
    assert shown[1] == "ABCD"[dev.task(picks[0])["answer"]]
    assert shown[4] == f"Q: {task['question']}"
    assert env.messages(task) == messages  # deterministic
    # Asking one of the sampled examples: it is replaced by the spare, never shown.
    asked = dev.task(picks[1])
    assert f"Q: {asked['question']}" not in _questions(env, asked)[:-1]
    assert len(env.messages(asked)) == 5


def test_few_shot_on_its_own_split_skips_the_task(make_env: MakeEnv) -> None:
    env = make_env(_spec("{split: test, n: 4, style: inline, answer: 'Answer: {{ answer | letter }}'}"))
    test = env.split("test")
    for index in range(6):
        task = test.task(index)
        text = env.messages(task)[0].blocks[0].text
        assert text.count("Answer: ") == 4
        assert text.count(f"Q: {task['question']}") == 1 and text.endswith(f"Q: {task['question']}")


def test_unknown_split_and_fields_are_reported_at_load(make_env: MakeEnv) -> None:
    spec = _spec("{split: devv, n: 2, answer: '{{ answr }}'}")
    with pytest.raises(SpecError) as info:
        make_env(spec)
    assert [str(p).split(" ", 1)[1] for p in info.value.problems] == [
        "prompt.few_shot.split: few_shot.split 'devv' is not a split of this environment Did you mean 'dev'?"
    ]
    with pytest.raises(SpecError) as info:
        make_env(_spec("{split: dev, n: 2, answer: '{{ answr }}'}"))
    assert [str(p).split(" ", 1)[1] for p in info.value.problems] == [
        "prompt.few_shot.answer: the template uses 'answr', which the tasks lack Did you mean 'answer'?"
    ]
