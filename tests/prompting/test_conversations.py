"""Conversations: templated turns and turns read from the data, placement checks, flattening."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from openreward.environments.types import Message as ORMessage
from openreward.environments.utils import flatten_messages as or_flatten

from envbuilder.environment import Environment
from envbuilder.errors import SpecError
from tests.conftest import ENVS
from tests.prompting.conftest import FIXTURES, RICH

MakeEnv = Callable[..., Environment]

#: docs/protocol.md §7.1: /messages of task c0 of the reference `convenv`, verified against [OR].
REFERENCE_C0 = json.loads((FIXTURES / "convenv_c0.json").read_text())


def _wire(messages: list) -> list:
    return [json.loads(m.model_dump_json()) for m in messages]


def test_rich_row_serves_the_reference_conversation(make_env: MakeEnv) -> None:
    env = make_env(RICH)
    assert _wire(env.messages(env.split("test").task(0))) == REFERENCE_C0


@pytest.mark.parametrize("index", [0, 1, 2])
def test_prompt_flattens_exactly_like_the_reference_sdk(make_env: MakeEnv, index: int) -> None:
    env = make_env(RICH)
    task = env.split("test").task(index)
    messages = env.messages(task)
    expected = or_flatten([ORMessage.model_validate(m.model_dump()) for m in messages])
    got = env.prompt(task)
    assert [b.model_dump() for b in got] == [b.model_dump() for b in expected]
    if index == 1:  # one plain user message: its blocks verbatim, no header
        assert [b.model_dump() for b in got] == [{"text": "What is 2+3?", "detail": None, "type": "text"}]
    if index == 0:
        texts = [b.text for b in got if b.type == "text"]
        assert texts[:3] == ["[system]", "You are a careful assistant.", "[user]"]
        assert (
            '[tool_call calculator] {"expr": "6*7"}' in texts
            and "<think>I should call the calculator.</think>" in texts
        )


def test_misplaced_block_is_reported_at_load_with_row_and_key(make_env: MakeEnv) -> None:
    text = RICH.replace("rich.parquet", "misplaced.parquet")
    with pytest.raises(SpecError) as info:
        make_env(text)
    assert [str(p) for p in info.value.problems] == [
        f"{info.value.problems[0].file}:8:26 prompt.conversation.column: split 'test' row 1: "
        "conversation[1]: A 'tool_result' block is not valid in a 'assistant' message: reasoning and "
        "tool_call blocks belong in 'assistant' turns, tool_result blocks in 'user' turns "
        "(Anthropic placement semantics)."
    ]


def test_hh_rlhf_conversation_with_system_prompt() -> None:
    from envbuilder.environment import load_environment

    env = load_environment(ENVS / "hh_rlhf.yaml")
    task = env.split("test").task(0)
    messages = env.messages(task)
    assert [m.role for m in messages] == ["system", *(t["role"] for t in task["messages"])]
    assert messages[-1].role == "user"
    assert [m.blocks[0].text for m in messages[1:]] == [t["content"] for t in task["messages"]]
    prompt = env.prompt(task)  # a system prompt makes /prompt a headed flattening (§7.2)
    assert (prompt[0].text, prompt[0].detail, prompt[2].text) == ("[system]", {"role": "system"}, "[user]")
    assert "chosen" not in task and task["id"] == task["source_line"]


def test_role_mapping_and_json_text_column(make_env: MakeEnv, tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    turns = [
        {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "hello"},
        {"from": "human", "value": "2+2?"},
    ]
    pq.write_table(
        pa.Table.from_pylist(
            [{"chat": json.dumps(turns), "answer": "4"}, {"chat": '[{"from": "bot"}]', "answer": "1"}]
        ),
        tmp_path / "chat.parquet",
    )
    spec = """\
name: chat
dataset: {type: parquet, files: {test: chat.parquet}}
splits: {test: {}}
prompt:
  conversation:
    column: chat
    role_key: from
    content_key: value
    roles: {human: user, gpt: assistant}
grader: {type: exact_match, target: "{{ answer }}"}
"""
    with pytest.raises(SpecError) as info:
        make_env(spec)
    [problem] = info.value.problems
    assert str(problem).endswith(
        "prompt.conversation.column: split 'test' row 1: chat[0].from: role 'bot' is not system, user or "
        "assistant. Map it with `roles: {bot: user}` under prompt.conversation"
    )
    pq.write_table(
        pa.Table.from_pylist([{"chat": json.dumps(turns), "answer": "4"}]), tmp_path / "chat.parquet"
    )
    env = make_env(spec)
    messages = env.messages(env.split("test").task(0))
    assert [(m.role, m.blocks[0].text) for m in messages] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "2+2?"),
    ]


def test_templated_turns(make_env: MakeEnv) -> None:
    spec = f"""\
name: turns
dataset: {{type: parquet, files: {{test: {ENVS / "data/digits/test-00000-of-00001.parquet"}}}}}
splits: {{test: {{}}}}
prompt:
  turns:
    - {{role: system, template: "You read handwriting."}}
    - {{role: user, template: "{{{{ question }}}}", images: [image]}}
    - {{role: assistant, template: "Let me look closely."}}
    - {{role: user, template: "Which digit? Submit it."}}
grader: {{type: exact_match, target: "{{{{ answer }}}}"}}
"""
    env = make_env(spec)
    messages = env.messages(env.split("test").task(3))
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert [b.type for b in messages[1].blocks] == ["image", "text"]


def test_unknown_fields_in_every_template_kind_are_reported_at_load(make_env: MakeEnv) -> None:
    spec = f"""\
name: bad
dataset: {{type: parquet, files: {{test: {ENVS / "data/digits/test-00000-of-00001.parquet"}}}}}
splits: {{test: {{}}}}
prompt:
  system: "{{{{ persona }}}}"
  turns:
    - {{role: user, template: "{{{{ questoin }}}}", images: [img]}}
grader: {{type: exact_match, target: "{{{{ answer }}}}"}}
"""
    with pytest.raises(SpecError) as info:
        make_env(spec)
    fields = "Task fields: answer, id, image, image_base64, label, pixels_8x8, question"
    assert sorted(str(p).split(" ", 1)[1] for p in info.value.problems) == [
        f"prompt.system: the template uses 'persona', which the tasks lack. {fields}",
        "prompt.turns[0].images[0]: split 'test' has no field 'img' Did you mean 'image'?",
        "prompt.turns[0]: the template uses 'questoin', which the tasks lack Did you mean 'question'?",
    ]


def test_conversation_is_checked_again_at_request_time(make_env: MakeEnv) -> None:
    from envbuilder.errors import DataError

    env = make_env(RICH)
    bad = {"id": "x", "conversation": [{"role": "assistant", "blocks": [{"type": "tool_result"}]}]}
    with pytest.raises(DataError) as info:
        env.messages(bad)
    assert info.value.message == (
        "conversation[0].blocks[0]: not a valid block: Field required (at tool_result.tool_call_id)"
    )


def test_prompt_env_messages_and_system_prompt(make_env: MakeEnv) -> None:
    base = f"""\
name: plain
dataset: {{type: parquet, files: {{test: {ENVS / "data/gsm8k/test-00000-of-00001.parquet"}}}}}
splits: {{test: {{}}}}
prompt:
  template: "{{{{ question }}}}"
grader: {{type: exact_match, target: "{{{{ answer | after('####') }}}}", extract: number}}
"""
    plain = make_env(base)
    task = plain.split("test").task(0)
    [user] = plain.messages(task)
    assert user.role == "user" and plain.prompt(task) == user.blocks
    system = make_env(base.replace("prompt:\n", "prompt:\n  system: Be brief.\n"), "system.yaml")
    assert [m.role for m in system.messages(task)] == ["system", "user"]
    assert [(b.text, b.detail) for b in system.prompt(task)] == [
        ("[system]", {"role": "system"}),
        ("Be brief.", None),
        ("[user]", {"role": "user"}),
        (task["question"], None),
    ]
