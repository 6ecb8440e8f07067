"""``envbuilder eval`` runs tool and multi-turn environments: the model's tool calls become ORS
calls, every tool's schema is offered, and the transcript shows every turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from envbuilder.environment import Environment
from envbuilder.eval import ChatModel, LocalBackend, RemoteBackend, plan_eval, run_eval, summarize
from envbuilder.retry import RetryPolicy
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply
from tests.servers import serve_app
from tests.tools.conftest import HERE as TOOLS_HERE
from tests.tools.conftest import SPEC as TOOLS_SPEC


def _run(backend_factory: Any, handler: Any, *, limit: int, max_turns: int = 6) -> tuple[Any, list[Any], Any]:
    async def main() -> tuple[Any, list[Any], Any]:
        backend = await backend_factory()
        with ChatServer(handler) as server:
            retry = RetryPolicy(max_retries=2, backoff=0.01, repeat_safe=True)
            model = ChatModel(server.base_url, "fake-model", api_key="sk-x", retry=retry)
            try:
                plan = await plan_eval(backend, model, split="test", limit=limit, max_turns=max_turns)
                records = await run_eval(backend, model, plan, concurrency=2)
            finally:
                await model.aclose()
                await backend.aclose()
                if isinstance(backend, LocalBackend):
                    await backend.env.aclose()  # the judge's connections belong to this loop
        return summarize(records), records, server

    return asyncio.run(main())


def _tools_policy(req: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Calculator, then the paid hint, then the answer the calculator gave."""
    tool_messages = [m for m in req["messages"] if m["role"] == "tool"]
    question = req["messages"][0]["content"]
    if not tool_messages:
        return 200, tool_call_reply("calculator", json.dumps({"expression": "2 * 4"}), "c1"), {}
    if len(tool_messages) == 1:
        return 200, tool_call_reply("hint", "{}", "c2"), {}
    answer = tool_messages[0]["content"] if "legs" in question else "Paris"
    return 200, tool_call_reply("submit", json.dumps({"answer": answer}), "c3"), {}


def test_eval_of_a_tool_environment_over_the_wire() -> None:
    env = Environment(parse_spec(TOOLS_SPEC, file="qa.yaml", base_dir=TOOLS_HERE))
    with serve_app(create_app([env], ServerSettings())) as url:
        summary, records, server = _run(lambda: RemoteBackend.connect(url), _tools_policy, limit=2)
    assert (summary.episodes, summary.errors) == (2, 0)
    assert summary.reward_all.mean == pytest.approx(0.75)  # both right, each less the hint's cost
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert offered == ["submit", "calculator", "hint", "lookup", "search", "give_up"]
    lookup = next(t for t in server.requests[0]["tools"] if t["function"]["name"] == "lookup")
    assert lookup["function"]["parameters"]["properties"]["key"]["enum"] == ["fr", "de", "spider", "cat"]
    record = next(r for r in records if r["index"] == 1)
    assert [c["name"] for c in record["tool_calls"]] == ["calculator", "hint", "submit"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool"] * 1 + [
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert [m.get("content") for m in record["messages"] if m["role"] == "tool"] == [
        "8",
        "More than an insect.",
        "Right.",
    ]


def _mt_bench_policy(req: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    turn = sum(1 for m in req["messages"] if m["role"] == "tool")
    return 200, tool_call_reply("submit", json.dumps({"answer": f"reply {turn + 1}"}), f"t{turn}"), {}


def test_eval_of_a_two_turn_dialogue_in_process() -> None:
    with ChatServer(lambda req, i: (200, reply("SCORE: 10"), {})) as judge:
        text = (ENVS / "mt_bench.yaml").read_text().replace("https://api.openai.com/v1", judge.base_url)
        text = text.replace("api_key_secret: OPENAI_API_KEY", "api_key_secret: null\n  api_key_env: PATH")
        env = Environment(parse_spec(text, file="mt_bench.yaml", base_dir=ENVS))

        async def local() -> LocalBackend:
            return LocalBackend(env)

        summary, records, _ = _run(local, _mt_bench_policy, limit=2)
    assert (summary.episodes, summary.errors, summary.reward_all.mean) == (2, 0, 1.0)
    record = records[0]
    assert record["turns"] == 2 and record["status"] == "finished"
    turns = env.split("test").task(record["index"])["turns"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert record["messages"][2]["content"] == turns[1]  # the second user turn, revealed
    assert record["messages"][4]["content"] == "The dialogue is over."
    assert len(judge.requests) == 4  # each reply judged
