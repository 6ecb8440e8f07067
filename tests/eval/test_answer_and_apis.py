"""``--answer text`` (plain final messages graded through the terminal tool), ``--api anthropic``
and ``--api responses`` against local servers of each wire format, token usage and ``--max-cost``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import load_environment
from envbuilder.llm import AnthropicModel, ResponsesModel
from envbuilder.server import create_app
from tests.conftest import ENVS
from tests.eval.conftest import arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply
from tests.fakes.model_apis import anthropic_reply, first_user_text, responses_reply
from tests.servers import serve_app

KEY = "sk-ant-test-never-leaks-987"


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_arithmetic(tmp_path / "envs")


def texting(wrong=lambda kind, n: False):
    """Answers in plain text, the way a chat model without tools does."""

    def handler(req: dict[str, Any], i: int):
        return 200, reply(f"Let me think. {arithmetic_answer(prompt_of(req), wrong)}"), {}

    return handler


def test_text_answers_are_graded_in_process(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ChatServer(texting(lambda kind, n: n % 2 == 1)) as server:
        result = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                     "--answer", "text", "--out", str(out))  # fmt: skip
        assert all("tools" not in r for r in server.requests)  # the answer tool is not offered
        tool_mode = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                        "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "answers in text are submitted to submit(answer), its only tool" in result.output
    assert "correct 3, incorrect 3, ungradeable 0, void 0, no answer 0, error 0" in result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["run"]["answer"] == "text"
    call = lines[1]["tool_calls"][0]
    assert call["via"] == "text" and json.loads(call["arguments"])["answer"].startswith("Let me think. ")
    assert tool_mode.exit_code == 1 and '--answer: "text" in the file, "tool" now' in tool_mode.output


def test_text_answers_over_the_wire_use_the_terminal_tool(tmp_path: Path) -> None:
    folder = write_arithmetic(tmp_path / "envs", names=("cube",), extra="submit:\n  terminal_tool: true\n")
    env = load_environment(folder / "cube.yaml")
    with serve_app(create_app([env])) as url, ChatServer(texting()) as server:
        result = cli("eval", url, "--model", "m", "--base-url", server.base_url, "--answer", "text",
                     "--limit", "3")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "answers in text are submitted to submit(answer), the environment's terminal_tool" in result.output
    assert "correct 3, incorrect 0" in result.output


def test_text_mode_without_an_answer_tool_is_refused() -> None:
    result = cli("eval", str(ENVS / "gsm8k_tools.yaml"), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--answer", "text")  # fmt: skip
    assert result.exit_code == 1
    assert (
        "--answer text: gsm8k-tools advertises no terminal_tool and has no single answer tool"
        in result.output
    )
    assert "Run it with --answer tool, or declare `submit: {terminal_tool: true}`" in result.output


def test_an_empty_text_reply_is_not_submitted(folder: Path) -> None:
    def handler(req: dict[str, Any], i: int):
        if len(req["messages"]) == 1:
            return 200, reply(""), {}
        assert req["messages"][-1] == {
            "role": "user",
            "content": "Your message was empty. Reply with your answer.",
        }
        return texting()(req, i)

    with ChatServer(handler) as server:
        result = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                     "--answer", "text", "--limit", "2", "--concurrency", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "correct 2," in result.output and len(server.requests) == 4


def anthropic_policy(req: dict[str, Any], i: int):
    """First a plain sentence, then (after the nudge) a tool_use with the right answer."""
    if len(req["messages"]) == 1:
        return 200, anthropic_reply("I will compute it."), {}
    return 200, anthropic_reply(None, ("submit", {"answer": arithmetic_answer(first_user_text(req))})), {}


def test_anthropic_messages_api(folder: Path) -> None:
    with ChatServer(anthropic_policy, route="/messages") as server:
        result = cli(
            "eval",
            str(folder / "square.yaml"),
            "--model",
            "claude-3-5-haiku-test",
            "--api",
            "anthropic",
            "--base-url",
            server.base_url,
            "--limit",
            "3",
            "--temperature",
            "0.2",
            env={"ANTHROPIC_API_KEY": KEY},
        )
    assert result.exit_code == 0, result.output
    assert "correct 3, incorrect 0" in result.output
    assert "tokens prompt / completion │ 66 / 42" in result.output or "66 / 42" in result.output
    # price table: claude-3-5-haiku $0.80 / $4 per million tokens
    assert "66 prompt + 42 completion tokens cost $0.0002 (list price as of" in result.output
    head = server.headers_seen[0]
    assert (
        head["x-api-key"] == KEY and head["anthropic-version"] == "2023-06-01" and "authorization" not in head
    )
    first = server.requests[0]
    second = next(r for r in server.requests if len(r["messages"]) > 1)
    assert (first["max_tokens"], first["temperature"]) == (4096, 0.2)
    assert first["tools"][0]["name"] == "submit" and first["tools"][0]["input_schema"]["type"] == "object"
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == [{"type": "text", "text": "I will compute it."}]
    assert KEY not in result.output


def test_anthropic_translates_tool_results_and_system() -> None:
    def handler(req: dict[str, Any], i: int):
        return 200, anthropic_reply("ok"), {}

    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "calc", "arguments": '{"x": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "user", "content": "Now answer."},
    ]  # fmt: skip
    with ChatServer(handler, route="/messages") as server:

        async def go() -> dict[str, Any]:
            model = AnthropicModel(server.base_url, "claude-x")
            try:
                return await model.complete(conversation, [])
            finally:
                await model.aclose()

        answer = asyncio.run(go())
    sent = server.requests[0]
    assert sent["system"] == "Be brief."
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "calc", "input": {"x": 1}},
            {"type": "tool_use", "id": "c2", "name": "calc", "input": {"x": 2}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "1"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "2"},
            {"type": "text", "text": "Now answer."}]},
    ]  # fmt: skip
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "ok"}
    assert answer["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def test_openai_responses_api(folder: Path, tmp_path: Path) -> None:
    def handler(req: dict[str, Any], i: int):
        return 200, responses_reply(None, ("submit", {"answer": arithmetic_answer(first_user_text(req))})), {}

    out = tmp_path / "r.jsonl"
    with ChatServer(handler, route="/responses") as server:
        result = cli(
            "eval",
            str(folder / "cube.yaml"),
            "--model",
            "gpt-4o-mini",
            "--api",
            "responses",
            "--base-url",
            server.base_url,
            "--limit",
            "2",
            "--max-tokens",
            "50",
            "--out",
            str(out),
        )
    assert result.exit_code == 0, result.output
    assert "correct 2, incorrect 0" in result.output
    sent = server.requests[0]
    assert sent["store"] is False and sent["max_output_tokens"] == 50
    assert sent["tools"][0]["type"] == "function" and sent["tools"][0]["name"] == "submit"
    assert sent["input"][0]["role"] == "user"
    record = json.loads(out.read_text().splitlines()[1])
    assert record["usage"]["prompt_tokens"] == 13 and record["usage"]["completion_tokens"] == 3
    assert "--api responses" in json.loads(out.read_text().splitlines()[0])["command"]


def test_responses_translates_a_tool_round_trip() -> None:
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ]  # fmt: skip
    with ChatServer(lambda req, i: (200, responses_reply("done"), {}), route="/responses") as server:

        async def go() -> dict[str, Any]:
            model = ResponsesModel(server.base_url, "gpt-x")
            try:
                return await model.complete(conversation, [])
            finally:
                await model.aclose()

        answer = asyncio.run(go())
    assert server.requests[0]["input"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "c1", "name": "calc", "arguments": '{"x": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
    ]
    assert answer["choices"][0]["message"]["content"] == "done"


def test_max_cost_stops_starting_episodes_and_a_rerun_continues(folder: Path, tmp_path: Path) -> None:
    def handler(req: dict[str, Any], i: int):
        return 200, tool_call_reply("submit", json.dumps({"answer": arithmetic_answer(prompt_of(req))})), {}

    out = tmp_path / "r.jsonl"
    # each reply: 10 prompt + 5 completion tokens at $1,000 per million = $0.015
    base = [
        "eval",
        str(folder / "square.yaml"),
        "--model",
        "local",
        "--concurrency",
        "1",
        "--price",
        "1000,1000",
        "--out",
        str(out),
    ]
    with ChatServer(handler) as server:
        first = cli(*base, "--base-url", server.base_url, "--max-cost", "0.04")
        assert first.exit_code == 0, first.output
        assert len(server.requests) == 3
        assert "envbuilder: stopped: --max-cost $0.04 reached" in first.output
        assert "cost $0.0450 (--price)" in first.output
        second = cli(*base, "--base-url", server.base_url, "--max-cost", "1")
    assert second.exit_code == 0, second.output
    assert "3 already in" in second.output and len(server.requests) == 6
    unpriced = cli("eval", str(folder / "square.yaml"), "--model", "local", "--base-url", "http://127.0.0.1:9/v1",
                   "--max-cost", "1")  # fmt: skip
    assert unpriced.exit_code == 1
    assert "error: --max-cost: no price for model 'local' in the price table" in unpriced.output
    assert "--price IN,OUT" in unpriced.output


def test_an_unknown_api_is_an_error() -> None:
    result = cli(
        "eval", str(ENVS / "gsm8k.yaml"), "--model", "m", "--base-url", "http://x/v1", "--api", "antropic"
    )
    assert result.exit_code == 1
    assert (
        "--api 'antropic': expected one of chat, anthropic, responses. Did you mean 'anthropic'?"
        in result.output
    )
