"""Dual control in process: the simulated user's own tools (envs/phone_support.yaml), their
bounds, what graders see of them, a failed turn that changes nothing, and the reply cache's key."""

from __future__ import annotations

import json
from typing import Any

from envbuilder.environment import Environment, Episode
from envbuilder.episode.simulated_user import MAX_CALLS_PER_ROUND
from envbuilder.protocol import RunToolSuccess
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply


def _env(base_url: str, *edits: tuple[str, str], cache: bool = False) -> Environment:
    text = (ENVS / "phone_support.yaml").read_text().replace("https://api.openai.com/v1", base_url)
    more = "\n  max_retries: 0\n  backoff: 0" + ("" if cache else "\n  cache: false")
    text = text.replace("max_turns: 20", "max_turns: 20" + more)
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    return Environment(parse_spec(text, file="phone_support.yaml", base_dir=ENVS))


def _call(name: str, arguments: dict[str, Any] | str, call_id: str = "c") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


async def _send(env: Environment, episode: Episode, message: str) -> Any:
    result = await env.call_tool(episode, "send_message", {"message": message})
    assert isinstance(result, RunToolSuccess)
    return result.output


def _airplane_then_answer(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    if "anything else" in (body["messages"][-1].get("content") or "").lower():
        return 200, reply("Bye ###STOP###"), {}
    if body["messages"][-1]["role"] == "user" and "airplane" in body["messages"][-1]["content"]:
        return 200, reply(None, [_call("set_airplane_mode", {"enabled": False})]), {}
    return 200, reply("Done, I have signal now."), {}


async def test_graders_see_both_sides_calls_marked_by_who_made_them() -> None:
    with ChatServer(_airplane_then_answer) as chat:
        env = _env(chat.base_url)
        episode = Episode(task=env.split("test").task(0))
        await env.call_tool(episode, "get_line_details", {"phone_number": "555-0101"})
        out = await _send(env, episode, "Turn airplane mode off, please.")
        assert out.metadata["user_actions"] == ["set_airplane_mode"]
        trajectory = env.toolbox.trajectory(episode)
        made = [(c["by"], c["name"], c["error"]) for c in trajectory.calls]
        assert made == [("agent", "get_line_details", False), ("user", "set_airplane_mode", False)]
        assert trajectory.messages == ["Turn airplane mode off, please."]
        last = await _send(env, episode, "Anything else?")
        assert (last.finished, last.reward) == (True, 1.0)
    entry = episode.transcript[1]
    assert (entry["by"], entry["round"], entry["input"]) == ("user", 0, {"enabled": False})
    assert json.loads(json.dumps(episode.to_dict())) == episode.to_dict()  # the session stays JSON


async def test_tool_rounds_are_bounded_then_the_user_must_answer_in_text() -> None:
    """A user model that keeps calling tools gets at most `max_tool_rounds` rounds; the request
    after the last asks for text (`tool_choice: none`), and the endpoint's text is the turn."""

    def busy(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        if body.get("tool_choice") == "none":
            return 200, reply("I give up fiddling."), {}
        return 200, reply(None, [_call("check_status_bar", {})]), {}

    with ChatServer(busy) as chat:
        env = _env(chat.base_url)
        episode = Episode(task=env.split("test").task(0))
        out = await _send(env, episode, "Please look at your phone.")
    assert out.blocks[0].text == "I give up fiddling." and not out.finished
    assert out.metadata["user_actions"] == ["check_status_bar"] * 3  # max_tool_rounds: 3
    assert len(chat.requests) == 4
    assert [r.get("tool_choice") for r in chat.requests] == [None, None, None, "none"]


async def test_calls_past_the_rounds_bound_unknown_tools_and_bad_arguments_are_not_run() -> None:
    many = [_call("set_mobile_data", {"enabled": True}, f"c{i}") for i in range(MAX_CALLS_PER_ROUND + 2)]
    odd = [_call("unlock_bootloader", {}), _call("set_airplane_mode", "{not json"), *many]

    def script(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        return (200, reply(None, odd), {}) if index == 0 else (200, reply("Ok."), {})

    with ChatServer(script) as chat:
        env = _env(chat.base_url)
        episode = Episode(task=env.split("test").task(0))
        await _send(env, episode, "Do things.")
        results = [m for m in chat.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(odd)
    assert results[0]["content"].startswith("Error: 'unlock_bootloader' was not run: it is not one of your")
    assert "the arguments are not a JSON object" in results[1]["content"]
    run = [r for r in results[2:] if not r["content"].startswith("Error:")]
    assert len(run) == MAX_CALLS_PER_ROUND - 2  # the reply's first two calls count too
    assert all("at most 8 tool calls per reply" in r["content"] for r in results[MAX_CALLS_PER_ROUND:])
    assert [e["error"] for e in episode.transcript if e.get("by") == "user"].count(False) == len(run)


async def test_a_turn_that_fails_changes_nothing_its_users_calls_neither() -> None:
    """The user changes a setting, then its endpoint refuses the next request: the turn is not
    delivered, and the state, the transcript and the counts are as before the message."""

    def refuse_after_acting(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        if body["messages"][-1]["role"] == "user":
            return 200, reply(None, [_call("set_airplane_mode", {"enabled": False})]), {}
        return 400, {"error": {"message": "refused"}}, {}

    with ChatServer(refuse_after_acting) as chat:
        env = _env(chat.base_url)
        episode = Episode(task=env.split("test").task(0))
        before = json.dumps(episode.to_dict(), sort_keys=True)
        out = await _send(env, episode, "Turn airplane mode off.")
    assert out.metadata["error"].startswith("the simulated user is unavailable") and not out.finished
    after = episode.to_dict()
    assert [e["name"] for e in after["transcript"]] == ["send_message"]  # the failed message only
    after["transcript"] = []
    assert json.dumps(after, sort_keys=True) == before


async def test_the_reply_cache_never_replays_after_the_template_model_or_sampling_changed() -> None:
    """The same conversation is answered from the cache; a changed template, model,
    temperature or set of user tools is a new request (its key includes them)."""
    with ChatServer(lambda body, i: (200, reply(f"Reply {i}."), {})) as chat:

        async def first_reply(*edits: tuple[str, str]) -> str:
            env = _env(chat.base_url, *edits, cache=True)
            out = await _send(env, Episode(task=env.split("test").task(1)), "Hello, cache test 7.")
            return str(out.blocks[0].text)

        assert await first_reply() == "Reply 0."
        assert await first_reply() == "Reply 0."  # cached: no request
        assert len(chat.requests) == 1
        assert await first_reply(("Write one short message", "Write one very short message")) == "Reply 1."
        assert await first_reply(("model: gpt-4.1-mini", "model: gpt-4.1")) == "Reply 2."
        warmer = ("max_tool_rounds: 3", "max_tool_rounds: 3\n  temperature: 0.5")
        assert await first_reply(warmer) == "Reply 3."
        bounded = ("      input: {}\n", "      input: {}\n      max_calls: 5\n")  # not in the request
        assert await first_reply(bounded) == "Reply 0."
        renamed = ("      name: set_data_roaming", "      name: set_roaming")
        assert await first_reply(renamed) == "Reply 4."  # the user's tools changed
        assert len(chat.requests) == 5
