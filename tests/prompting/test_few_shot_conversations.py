"""Few-shot examples with `turns` and `conversation` prompts: after the leading system messages,
as prior turns or inline, never the task being asked; checked at load; served end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from openreward.environments.types import Message as ORMessage
from openreward.environments.utils import flatten_messages as or_flatten

from envbuilder.environment import Environment
from envbuilder.errors import SpecError
from envbuilder.protocol import ImageBlock, Message, TextBlock
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.servers import serve_app

MakeEnv = Callable[..., Environment]

MMLU = ENVS / "data/mmlu_stem"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _mmlu(prompt: str) -> str:
    return f"""\
name: fs
dataset:
  type: parquet
  files: {{test: {MMLU / "test-00000-of-00001.parquet"}, dev: {MMLU / "dev-00000-of-00001.parquet"}}}
splits:
  test: {{}}
  dev: {{type: validation}}
prompt:
{prompt}
grader: {{type: exact_match, target: "{{{{ answer | letter }}}}"}}
"""


def _texts(message: Message) -> list[str]:
    return [b.text for b in message.blocks if isinstance(b, TextBlock)]


def _roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


def _flattens_like_the_sdk(env: Environment, task: dict) -> None:
    expected = or_flatten([ORMessage.model_validate(m.model_dump()) for m in env.messages(task)])
    assert [b.model_dump() for b in env.prompt(task)] == [b.model_dump() for b in expected]


# -- turns prompts ---------------------------------------------------------------------------------


def test_turns_prompt_examples_as_turns_after_the_system_turns(make_env: MakeEnv) -> None:
    env = make_env(
        _mmlu("""\
  system: "Subject: {{ subject }}"
  turns:
    - {role: system, template: "Answer with one letter."}
    - {role: user, template: "Q: {{ question }}"}
  few_shot: {split: dev, n: 2, answer: "{{ answer | letter }}"}
""")
    )
    dev, task = env.split("dev"), env.split("test").task(3)
    messages = env.messages(task)
    assert _roles(messages) == ["system", "system", "user", "assistant", "user", "assistant", "user"]
    assert [_texts(m)[0] for m in messages] == [
        f"Subject: {task['subject']}",
        "Answer with one letter.",
        f"Q: {dev.task(0)['question']}",  # the user turn's own template, over the example
        "ABCD"[dev.task(0)["answer"]],
        f"Q: {dev.task(1)['question']}",
        "ABCD"[dev.task(1)["answer"]],
        f"Q: {task['question']}",
    ]
    _flattens_like_the_sdk(env, task)


def test_turns_prompt_inline_goes_into_the_first_user_turn(make_env: MakeEnv) -> None:
    env = make_env(
        _mmlu("""\
  turns:
    - {role: system, template: "Be brief."}
    - {role: user, template: "Q: {{ question }}"}
    - {role: assistant, template: "Thinking."}
    - {role: user, template: "Now the letter."}
  few_shot:
    split: dev
    n: 2
    style: inline
    template: "Example: {{ question }}"
    answer: "Answer: {{ answer | letter }}"
""")
    )
    dev, task = env.split("dev"), env.split("test").task(0)
    messages = env.messages(task)
    assert _roles(messages) == ["system", "user", "assistant", "user"]
    [first] = messages[1].blocks
    assert isinstance(first, TextBlock)
    a, b = dev.task(0), dev.task(1)
    assert first.text == (
        f"Example: {a['question']}\nAnswer: {'ABCD'[a['answer']]}\n\n"
        f"Example: {b['question']}\nAnswer: {'ABCD'[b['answer']]}\n\n"
        f"Q: {task['question']}"
    )
    assert [_texts(m) for m in messages[2:]] == [["Thinking."], ["Now the letter."]]
    _flattens_like_the_sdk(env, task)


def test_turns_prompt_never_shows_the_task_asked(make_env: MakeEnv) -> None:
    env = make_env(
        _mmlu("""\
  turns: [{role: user, template: "Q: {{ question }}"}]
  few_shot: {split: test, n: 3, answer: "{{ answer | letter }}"}
""")
    )
    test = env.split("test")
    for index in range(5):
        task = test.task(index)
        messages = env.messages(task)
        questions = [_texts(m)[0] for m in messages if m.role == "user"]
        assert len(questions) == 4 and questions[-1] == f"Q: {task['question']}"
        assert f"Q: {task['question']}" not in questions[:-1]
        assert env.messages(json.loads(json.dumps(task))) == messages  # the same task as task_spec


# -- conversation prompts --------------------------------------------------------------------------


def _chat_spec(tmp_path: Path, few_shot: str, system: str = "") -> str:
    def row(i: int) -> dict:
        turns = [
            {"role": "system", "content": "Be kind."},
            {
                "role": "user",
                "content": [
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "text", "text": f"Hi {i}", "detail": {"k": i}},
                ],
            },
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": f"What is {i}+{i}?"},
        ]
        return {
            "id": f"r{i}",
            "chat": json.dumps(turns),
            "question": f"What is {i}+{i}?",
            "answer": str(2 * i),
        }

    pq.write_table(pa.Table.from_pylist([row(i) for i in range(6)]), tmp_path / "chat.parquet")
    pq.write_table(pa.Table.from_pylist([row(i) for i in range(10, 13)]), tmp_path / "dev.parquet")
    return f"""\
name: chat
dataset: {{type: parquet, files: {{test: chat.parquet, dev: dev.parquet}}}}
splits: {{test: {{}}, dev: {{type: validation}}}}
prompt:
  {system}
  conversation: {{column: chat}}
  few_shot: {few_shot}
grader: {{type: exact_match, target: "{{{{ answer }}}}"}}
"""


def test_conversation_examples_as_turn_pairs_after_the_system_messages(
    make_env: MakeEnv, tmp_path: Path
) -> None:
    env = make_env(
        _chat_spec(
            tmp_path,
            "{split: dev, n: 2, template: 'Q: {{ question }}', answer: 'A: {{ answer }}'}",
            system="system: Spec system.",
        )
    )
    task = env.split("test").task(1)
    messages = env.messages(task)
    assert _roles(messages) == [
        "system",
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [_texts(m) for m in messages[:6]] == [
        ["Spec system."],
        ["Be kind."],
        ["Q: What is 10+10?"],
        ["A: 20"],
        ["Q: What is 11+11?"],
        ["A: 22"],
    ]
    own = messages[6:]
    assert [_texts(m) for m in own] == [["Hi 1"], ["Hello."], ["What is 1+1?"]]
    assert isinstance(own[0].blocks[0], ImageBlock)
    _flattens_like_the_sdk(env, task)


def test_conversation_inline_prepends_to_the_first_user_text(make_env: MakeEnv, tmp_path: Path) -> None:
    env = make_env(
        _chat_spec(
            tmp_path,
            "{split: dev, n: 2, style: inline, separator: ' | ', template: 'Q: {{ question }}', "
            "answer: 'A: {{ answer }}'}",
        )
    )
    task = env.split("test").task(2)
    messages = env.messages(task)
    assert _roles(messages) == ["system", "user", "assistant", "user"]
    image, text = messages[1].blocks
    assert isinstance(image, ImageBlock) and isinstance(text, TextBlock)  # the image stays first
    assert text.text == "Q: What is 10+10?\nA: 20 | Q: What is 11+11?\nA: 22 | Hi 2"
    assert text.detail == {"k": 2}  # the row's block keeps its detail
    assert [_texts(m) for m in messages[2:]] == [["Hello."], ["What is 2+2?"]]
    _flattens_like_the_sdk(env, task)


@pytest.mark.parametrize("style", ["turns", "inline"])
def test_conversation_never_shows_the_task_asked(make_env: MakeEnv, tmp_path: Path, style: str) -> None:
    env = make_env(
        _chat_spec(
            tmp_path,
            f"{{split: test, n: 3, style: {style}, "
            "template: 'Q: {{ question }}', answer: '{{ answer }}'}",
        )
    )
    test = env.split("test")
    for index in range(6):
        task = test.task(index)
        shown = "\n".join(t for m in env.messages(task) for t in _texts(m))
        others = [i for i in range(6) if f"Q: What is {i}+{i}?" in shown]
        assert len(others) == 3 and index not in others
        assert others == [i for i in range(4) if i != index][:3]  # the first N, the spare replacing it


# -- load-time checks ------------------------------------------------------------------------------


def _problems(make_env: MakeEnv, text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        make_env(text)
    return [str(p).split(" ", 1)[1] for p in info.value.problems]


def test_unknown_fields_in_example_templates_are_located(make_env: MakeEnv, tmp_path: Path) -> None:
    assert _problems(
        make_env,
        _mmlu("""\
  turns: [{role: user, template: "Q: {{ question }}"}]
  few_shot: {split: dev, n: 2, template: "{{ questoin }}", answer: "{{ answr }}"}
"""),
    ) == [
        "prompt.few_shot.answer: the template uses 'answr', which the tasks lack Did you mean 'answer'?",
        "prompt.few_shot.template: the template uses 'questoin', which the tasks lack "
        "Did you mean 'question'?",
    ]
    problems = _problems(
        make_env, _chat_spec(tmp_path, "{split: dev, n: 2, template: '{{ prompt }}', answer: '{{ answer }}'}")
    )
    assert problems == [
        "prompt.few_shot.template: the template uses 'prompt', which the tasks lack. "
        "Task fields: answer, chat, id, question"
    ]


def test_a_question_template_is_required_when_there_is_no_single_user_turn(
    make_env: MakeEnv, tmp_path: Path
) -> None:
    hint = ' e.g. `template: "{{ question }}"`: the examples\' user turns'
    assert _problems(
        make_env,
        _mmlu("""\
  turns: [{role: user, template: "{{ question }}"}, {role: user, template: "Letter?"}]
  few_shot: {split: dev, n: 2, answer: "{{ answer }}"}
"""),
    ) == [
        "prompt.few_shot: the turns hold 2 user turns: few_shot needs `template` (an example's question)."
        + hint
    ]
    assert _problems(make_env, _chat_spec(tmp_path, "{split: dev, n: 2, answer: '{{ answer }}'}")) == [
        "prompt.few_shot: with a `conversation` prompt, few_shot needs `template` (an example's question)."
        + hint
    ]


# -- end to end ------------------------------------------------------------------------------------


def test_served_conversation_few_shot_in_openai_shape(make_env: MakeEnv, tmp_path: Path) -> None:
    from openreward import EnvironmentsAPI

    env = make_env(
        _chat_spec(tmp_path, "{split: test, n: 2, template: 'Q: {{ question }}', answer: '{{ answer }}'}")
    )
    with serve_app(create_app([env], ServerSettings())) as url:
        api = EnvironmentsAPI(base_url=url, api_key=None)
        try:
            with api.get(name="chat", variant="chat").session(split="test", index=0) as s:
                openai = s.get_messages(format="openai")
                prompt = s.get_prompt()
        finally:
            close = getattr(api, "close", None)
            if close is not None:
                close()
    assert openai == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Q: What is 1+1?"},  # task 0 asked: examples are 1 and 2
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "Q: What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "text", "text": "Hi 0"},
            ],
        },
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "What is 0+0?"},
    ]
    assert [b.text for b in prompt if b.type == "text"][:4] == [
        "[system]",
        "Be kind.",
        "[user]",
        "Q: What is 1+1?",
    ]
