"""End to end: both reference clients drive a two-turn MT-Bench episode (judged by the local chat
server) and a tool-using episode against a real uvicorn, and ``/messages`` has the seed's shapes
at every step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply
from tests.servers import serve_app
from tests.tools.conftest import HERE as TOOLS_HERE
from tests.tools.conftest import SPEC as TOOLS_SPEC

KEY = "sk-test-agentic"


def _judge(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    prompt = body["messages"][-1]["content"]
    # The second turn's judge prompt shows the first exchange, then rates the second reply.
    score = 6 if "second reply" in prompt.split("the reply to rate")[-1] else 9
    return 200, reply(f"Fine.\nSCORE: {score}"), {}


@pytest.fixture(scope="module")
def judge() -> Iterator[ChatServer]:
    with ChatServer(_judge) as server:
        yield server


# One environment per server: ors-sdk's /create names no environment (the server's default).
@pytest.fixture(scope="module")
def url(judge: ChatServer) -> Iterator[str]:
    text = (ENVS / "mt_bench.yaml").read_text().replace("https://api.openai.com/v1", judge.base_url)
    mt_bench = Environment(parse_spec(text, file="mt_bench.yaml", base_dir=ENVS))
    with serve_app(create_app([mt_bench], ServerSettings(ping_interval=0.2))) as base:
        yield base


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    tools = Environment(parse_spec(TOOLS_SPEC, file="qa.yaml", base_dir=TOOLS_HERE))
    with serve_app(create_app([tools], ServerSettings(ping_interval=0.2))) as base:
        yield base


def _messages(url: str, env: str, sid: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/{env}/messages", headers={"X-Session-ID": sid})
    assert response.status_code == 200, response.text
    return response.json()


def _turns(url: str) -> list[str]:
    task = httpx.post(f"{url}/mt_bench/task", json={"split": "test", "index": 0}).json()["task"]
    return task["turns"]


def _check_mt_bench_messages(messages: list[dict[str, Any]], turns: list[str], replies: list[str]) -> None:
    """The prompt, then per reply an assistant tool_call and a user tool_result (the next turn)."""
    assert messages[0] == {
        "role": "user",
        "blocks": [{"text": turns[0], "detail": None, "type": "text"}],
        "detail": None,
    }
    assert len(messages) == 1 + 2 * len(replies)
    for k, answer in enumerate(replies):
        call, result = messages[1 + 2 * k], messages[2 + 2 * k]
        assert call == {
            "role": "assistant",
            "blocks": [
                {
                    "id": f"call_{k + 1}",
                    "name": "submit",
                    "input": {"answer": answer},
                    "detail": None,
                    "type": "tool_call",
                }
            ],
            "detail": None,
        }
        assert result["role"] == "user"
        (block,) = result["blocks"]
        assert (block["type"], block["tool_call_id"], block["is_error"]) == (
            "tool_result",
            f"call_{k + 1}",
            False,
        )
        expected = turns[k + 1] if k + 1 < len(turns) else "The dialogue is over."
        assert block["blocks"] == [{"text": expected, "detail": None, "type": "text"}]


MEAN = ((9 - 1) / 9 + (6 - 1) / 9) / 2


def test_ors_sdk_two_turn_mt_bench(url: str, judge: ChatServer) -> None:
    from ors.client import ORS

    turns = _turns(url)
    seen = len(judge.requests)
    with ORS(base_url=url) as client:
        env = client.environment("mt_bench")
        with env.session(split="test", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
            _check_mt_bench_messages(_messages(url, "mt_bench", s.sid), turns, [])
            first = s.call_tool("submit", {"answer": "A first reply about Hawaii."})
            assert first.blocks[0].text == turns[1]
            assert (first.reward, first.finished) == (None, False)
            assert first.metadata["score"] == pytest.approx(8 / 9)
            _check_mt_bench_messages(
                _messages(url, "mt_bench", s.sid), turns, ["A first reply about Hawaii."]
            )
            second = s.call_tool("submit", {"answer": "My second reply, rewritten."})
            assert second.finished is True
            assert second.reward == pytest.approx(MEAN)
            assert second.metadata["scores"] == pytest.approx([8 / 9, 5 / 9])
            _check_mt_bench_messages(
                _messages(url, "mt_bench", s.sid),
                turns,
                ["A first reply about Hawaii.", "My second reply, rewritten."],
            )
    requests = judge.requests[seen:]
    assert len(requests) == 2
    second_prompt = requests[1]["messages"][-1]["content"]
    # The judge of the second reply sees the whole dialogue so far, and the category.
    assert turns[0] in second_prompt and "A first reply about Hawaii." in second_prompt
    assert turns[1] in second_prompt and "(writing)" in second_prompt
    assert {h["authorization"] for h in judge.headers_seen} == {f"Bearer {KEY}"}


def test_openreward_two_turn_mt_bench(url: str) -> None:
    from openreward import EnvironmentsAPI

    turns = _turns(url)
    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="mt_bench", variant="mt_bench")
    with env.session(split="test", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
        assert [m.role for m in s.get_messages()] == ["user"]
        first = s.call_tool("submit", {"answer": "A first reply about Hawaii."})
        assert first.blocks[0].text == turns[1]
        openai = s.get_messages(format="openai")
        assert openai == [
            {"role": "user", "content": turns[0]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "submit",
                            "arguments": '{"answer": "A first reply about Hawaii."}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": turns[1]},
        ]
        second = s.call_tool("submit", {"answer": "My second reply."})
        assert (second.reward, second.finished) == (pytest.approx(MEAN), True)
        raw = s.get_messages()
        assert [m.role for m in raw] == ["user", "assistant", "user", "assistant", "user"]


def test_ors_sdk_tool_episode(tools_url: str) -> None:
    url = tools_url
    from ors.client import ORS

    with ORS(base_url=url) as client:
        env = client.environment("qa-tools")
        assert [t.name for t in env.list_tools()] == ["submit", "calculator", "hint", "search", "give_up"]
        with env.session(split="test", index=1) as s:
            assert "lookup" in [t.name for t in s.list_tools()]  # task-scoped: /task_tools only
            out = s.call_tool("search", {"query": "legs of spiders"})
            assert out.blocks[0].text.startswith("[1] Spiders are arachnids with eight legs.")
            out = s.call_tool("calculator", {"expression": "2 * 4"})
            assert out.blocks[0].text == "8"
            out = s.call_tool("hint", {})
            assert out.metadata == {"cost": 0.25}
            out = s.call_tool("submit", {"answer": "8"})
            assert (out.reward, out.finished) == (0.75, True)
            messages = _messages(url, "qa-tools", s.sid)
            names = [m["blocks"][0]["name"] for m in messages if m["role"] == "assistant"]
            assert names == ["search", "calculator", "hint", "submit"]
            results = [m["blocks"][0] for m in messages[2::2]]
            assert [r["type"] for r in results] == ["tool_result"] * 4
            assert [r["blocks"][0]["text"] for r in results][1:] == ["8", "More than an insect.", "Right."]


def test_openreward_tool_episode(tools_url: str) -> None:
    url = tools_url
    from openreward import EnvironmentsAPI
    from openreward.api.environments.types import ToolCallError

    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="qa-tools", variant="qa-tools")
    with env.session(split="test", index=0) as s:
        assert [t.name for t in s.list_tools()] == [
            "submit",
            "calculator",
            "hint",
            "lookup",
            "search",
            "give_up",
        ]
        out = s.call_tool("lookup", {"key": "fr"})
        assert out.blocks[0].text == "Paris"
        with pytest.raises(ToolCallError) as info:
            s.call_tool("lookup", {"key": "nope"})
        assert info.value.reason == "input_validation"
        out = s.call_tool("calculator", {"expression": "1/0"})
        assert out.blocks[0].text == "Error: 'calculator' failed: division by zero"
        out = s.call_tool("give_up", {})
        assert (out.reward, out.finished) == (0.0, True)
        anthropic = s.get_messages(format="anthropic")
        kinds = [[b["type"] for b in m["content"]] for m in anthropic["messages"]]
        assert kinds == [["text"]] + [["tool_use"], ["tool_result"]] * 3  # lookup, calculator, give_up
        assert anthropic["messages"][4]["content"][0]["is_error"] is True
        assert "is_error" not in anthropic["messages"][2]["content"][0]
        with pytest.raises(ToolCallError) as info:
            s.call_tool("calculator", {"expression": "1"})
        assert info.value.reason == "episode_finished"


def test_rich_blocks_stay_in_place_as_the_episode_grows(tmp_path: Path) -> None:
    """A conversation prompt with reasoning/tool_call/tool_result blocks, then the agent's calls:
    every step's /messages keeps the prompt's rich blocks in place and converts in every format."""
    from openreward import EnvironmentsAPI

    from tests.prompting.conftest import RICH

    spec = tmp_path / "rich.yaml"
    spec.write_text(RICH + "submit: {max_attempts: 2}\n")
    env = Environment(parse_spec(spec.read_text(), file="rich.yaml", base_dir=tmp_path))
    with serve_app(create_app([env])) as url:
        api = EnvironmentsAPI(base_url=url, api_key=None)
        with api.get(name="rich", variant="rich").session(split="test", index=0) as s:
            before = [m.model_dump() for m in env.messages(env.split("test").task(0))]
            for step, answer in enumerate(["41", "42"], 1):
                s.call_tool("submit", {"answer": answer})
                raw = _messages(url, "rich", s.sid)
                assert raw[: len(before)] == before  # the prompt's blocks, reasoning included, in place
                added = raw[len(before) :]
                assert [m["role"] for m in added] == ["assistant", "user"] * step
                assert [m["blocks"][0]["type"] for m in added] == ["tool_call", "tool_result"] * step
                assert s.get_messages(format="openai")[-1]["role"] == "tool"
                assert (
                    s.get_messages(format="anthropic")["messages"][-1]["content"][0]["type"] == "tool_result"
                )
            assert [b["type"] for b in before[2]["blocks"]] == ["reasoning", "text", "tool_call"]


def test_openreward_passes_a_plain_final_message_to_the_terminal_answer_tool() -> None:
    from openreward import EnvironmentsAPI

    text = TOOLS_SPEC.replace(
        "submit:\n  max_attempts: 2\n", "submit:\n  max_attempts: 2\n  terminal_tool: true\n"
    )
    env = Environment(parse_spec(text, file="qa.yaml", base_dir=TOOLS_HERE))
    with serve_app(create_app([env])) as url:
        api = EnvironmentsAPI(base_url=url, api_key=None)
        remote = api.get(name="qa-tools", variant="qa-tools")
        terminal = remote.terminal_tool()
        assert (terminal.name, terminal.arg) == ("submit", "answer")
        with remote.session(split="test", index=0) as s:
            wrong = s.call_terminal_tool("I think it is Lyon.")
            assert (wrong.finished, wrong.blocks[0].text) == (False, "You said I think it is Lyon.; 1 left.")
            right = s.call_terminal_tool("Paris")
            assert (right.reward, right.finished) == (1.0, True)
