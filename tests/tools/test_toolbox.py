"""Every call follows the toolbox's rules: schema, limits, cost, terminal tools, feedback, the
transcript that /messages shows, and a session that stays small and serialisable."""

from __future__ import annotations

import json
from typing import Any

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.protocol import RunToolError, RunToolSuccess
from envbuilder.server._sessions import SessionRecord


def _episode(env: Environment, index: int = 0) -> Episode:
    return Episode(task=env.split("test").task(index))


async def _call(env: Environment, episode: Episode, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await env.call_tool(episode, name, args)
    return result.model_dump()


async def test_a_paid_hint_then_a_wrong_and_a_right_answer(qa_env: Environment) -> None:
    episode = _episode(qa_env)
    hint = await _call(qa_env, episode, "hint", {})
    assert hint["output"]["blocks"][0]["text"] == "It is on the Seine."
    assert hint["output"]["metadata"] == {"cost": 0.25}
    assert hint["output"]["reward"] is None and not hint["output"]["finished"]
    again = await _call(qa_env, episode, "hint", {})
    assert again["output"]["blocks"][0]["text"] == (
        "Error: 'hint' was not run: it may be called at most 1 time per episode"
    )
    wrong = await _call(qa_env, episode, "submit", {"answer": "Lyon"})
    assert wrong["output"]["blocks"][0]["text"] == "You said Lyon; 1 left."
    assert not wrong["output"]["finished"]
    right = await _call(qa_env, episode, "submit", {"answer": "Paris"})
    assert right["output"]["blocks"][0]["text"] == "Right."
    assert right["output"]["reward"] == 0.75  # 1.0 less the hint's cost
    assert right["output"]["metadata"]["cost"] == 0.25
    assert right["output"]["finished"]
    after = await _call(qa_env, episode, "calculator", {"expression": "1+1"})
    assert after == {
        "ok": False,
        "error": "'calculator' was not run: the episode has finished (a tool returned finished=True), "
        "so no further tool calls are accepted.",
        "reason": "episode_finished",
    }


async def test_bad_input_is_refused_with_the_schema_message(qa_env: Environment) -> None:
    episode = _episode(qa_env)
    result = await qa_env.call_tool(episode, "lookup", {"key": "xx"})
    assert isinstance(result, RunToolError) and result.reason == "input_validation"
    assert "Input should be 'fr', 'de', 'spider' or 'cat'" in result.error
    result = await qa_env.call_tool(episode, "calculator", {"expression": "1", "extra": 2})
    assert isinstance(result, RunToolError) and "Extra inputs are not permitted" in result.error
    result = await qa_env.call_tool(episode, "calculator", {"expression": "x" * 501})
    assert isinstance(result, RunToolError) and "at most 500 characters" in result.error
    assert episode.tool_calls == {} and episode.transcript == []  # refused calls are not counted


async def test_tool_failures_are_error_outputs_not_exceptions(qa_env: Environment) -> None:
    episode = _episode(qa_env)
    out = await _call(qa_env, episode, "calculator", {"expression": "1/0"})
    assert out["ok"] and out["output"]["blocks"][0]["text"] == "Error: 'calculator' failed: division by zero"
    assert out["output"]["metadata"] == {"error": "'calculator' failed: division by zero"}
    out = await _call(qa_env, episode, "lookup", {"key": "cat"})  # the table has no such key
    assert out["ok"] and out["output"]["blocks"][0]["text"].startswith("Error: 'lookup' failed:")
    out = await _call(qa_env, episode, "search", {"query": "zebra"})
    assert out["output"]["blocks"][0]["text"] == "Error: 'search' failed: no passage matches 'zebra'"


async def test_lookup_and_retrieve(qa_env: Environment) -> None:
    episode = _episode(qa_env)
    out = await _call(qa_env, episode, "lookup", {"key": "de"})
    assert out["output"]["blocks"][0]["text"] == "Berlin"
    out = await _call(qa_env, episode, "search", {"query": "capital of France"})
    assert out["output"]["blocks"][0]["text"] == (
        "[1] Paris is the capital and largest city of France.\n\n[2] Berlin is the capital of Germany."
    )
    out = await _call(qa_env, episode, "search", {"query": "capital of France", "k": 1})
    assert out["output"]["blocks"][0]["text"] == "[1] Paris is the capital and largest city of France."
    assert qa_env.is_blocking("search") and not qa_env.is_blocking("calculator")


async def test_a_terminal_tool_ends_the_episode_without_credit(qa_env: Environment) -> None:
    episode = _episode(qa_env, 1)
    out = await _call(qa_env, episode, "give_up", {})
    assert out["output"] == {
        "blocks": [{"text": "You gave up.", "detail": None, "type": "text"}],
        "metadata": None,
        "reward": 0.0,
        "finished": True,
    }
    assert episode.finished


async def test_messages_show_every_call_in_place_and_the_session_round_trips(qa_env: Environment) -> None:
    episode = _episode(qa_env, 1)
    await qa_env.call_tool(episode, "calculator", {"expression": "4 * 2"})
    await qa_env.call_tool(episode, "calculator", {"expression": "1/0"})
    await qa_env.call_tool(episode, "submit", {"answer": "8"})
    messages = [m.model_dump() for m in qa_env.conversation(episode)]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert messages[1]["blocks"] == [
        {
            "id": "call_1",
            "name": "calculator",
            "input": {"expression": "4 * 2"},
            "detail": None,
            "type": "tool_call",
        }
    ]
    assert messages[2]["blocks"] == [
        {
            "tool_call_id": "call_1",
            "blocks": [{"text": "8", "detail": None, "type": "text"}],
            "is_error": False,
            "detail": None,
            "type": "tool_result",
        }
    ]
    assert messages[4]["blocks"][0]["is_error"] is True
    assert messages[6]["blocks"][0]["blocks"][0]["text"] == "Right."
    session = SessionRecord(sid="s", env="qa-tools", episode=episode)
    data = json.loads(json.dumps(session.to_dict()))  # plain JSON types only
    assert SessionRecord.from_dict(data).to_dict() == session.to_dict()
    assert len(json.dumps(data)) < 2000


def test_listings_hide_task_scoped_tools_from_tools_only(qa_env: Environment) -> None:
    shared = [t.name for t in qa_env.tools_listing.tools]
    every = [t.name for t in qa_env.task_tools_listing.tools]
    assert shared == ["submit", "calculator", "hint", "search", "give_up"]
    assert every == ["submit", "calculator", "hint", "lookup", "search", "give_up"]
    lookup = qa_env.task_tools_listing.tools[3]
    assert lookup.input_schema == {
        "additionalProperties": False,
        "properties": {
            "key": {
                "description": "The key.",
                "enum": ["fr", "de", "spider", "cat"],
                "title": "Key",
                "type": "string",
            }
        },
        "required": ["key"],
        "title": "lookup_input",
        "type": "object",
    }


async def test_unknown_tool(qa_env: Environment) -> None:
    result = await qa_env.call_tool(_episode(qa_env), "nosuch", {})
    assert result == RunToolError(error="'nosuch' is not a valid tool", reason="not_found")
    assert not isinstance(result, RunToolSuccess)


async def test_a_tool_only_for_tasks_that_have_its_field() -> None:
    from envbuilder.spec import parse_spec
    from tests.tools.conftest import HERE, SPEC

    text = SPEC + "  - {type: template, name: note, input: {}, template: '{{ note }}', only_for: note}\n"
    env = Environment(parse_spec(text, file="qa.yaml", base_dir=HERE))
    assert "note" not in [t.name for t in env.tools_listing.tools]
    with_note, without = (env.split("test").task(i) for i in (0, 1))
    assert [t.name for t in env.task_tools(with_note).tools][-1] == "note"
    assert "note" not in [t.name for t in env.task_tools(without).tools]
    out = await _call(env, Episode(task=with_note), "note", {})
    assert out["output"]["blocks"][0]["text"] == "The answer is a city."
    assert await _call(env, Episode(task=without), "note", {}) == {
        "ok": False,
        "error": "'note' is not a valid tool",
        "reason": "not_found",
    }
