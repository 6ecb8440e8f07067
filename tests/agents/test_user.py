"""The simulated user in process: the turn limit, the state bound, and a user that cannot be reached."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.environment import Episode
from envbuilder.protocol import RunToolSuccess
from tests.agents.conftest import bank_env
from tests.fakes.chat_server import ChatServer, reply

USER = "user: {base_url: '%s', model: m, template: 'You are Bob. {{ question }}', max_turns: 2, %s}\n"


async def _send(env: Any, episode: Episode, message: str) -> Any:
    result = await env.call_tool(episode, "send_message", {"message": message})
    assert isinstance(result, RunToolSuccess)
    return result.output


async def test_the_conversation_ends_at_max_turns_with_its_reward() -> None:
    with ChatServer(lambda body, i: (200, reply("Go on."), {})) as chat:
        env = bank_env(extra=USER % (chat.base_url, "cache: false"))
        episode = Episode(task=env.split("test").task(0))
        first = await _send(env, episode, "Hello")
        assert (first.blocks[0].text, first.finished, first.reward) == ("Go on.", False, None)
        last = await _send(env, episode, "Bye")
        assert last.finished and last.reward == 0.0  # nothing was done
        assert last.blocks[0].text.startswith("Go on.\n\n[The conversation reached its turn limit.")
        assert last.metadata["user_stopped"] is False
    system = chat.requests[0]["messages"][0]["content"]
    assert system.startswith("You are Bob. Move 30 from a1") and "###STOP###" in system


async def test_an_unreachable_user_is_an_error_output_and_the_agent_may_retry() -> None:
    env = bank_env(extra=USER % ("http://127.0.0.1:9/v1", "max_retries: 0, cache: false"))
    episode = Episode(task=env.split("test").task(0))
    out = await _send(env, episode, "Hello")
    assert not out.finished and out.reward is None
    assert out.metadata["error"].startswith("the simulated user is unavailable")
    assert "sk-" not in out.blocks[0].text


async def test_a_tool_cannot_grow_the_state_without_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuilder.episode import toolbox

    monkeypatch.setattr(toolbox, "MAX_STATE_CHANGES", 300)
    env = bank_env()
    episode = Episode(task=env.split("test").task(0))
    errors = []
    for _ in range(10):
        result = await env.call_tool(episode, "note", {"account": "a1", "text": "x" * 40})
        assert isinstance(result, RunToolSuccess)
        errors.append((result.output.metadata or {}).get("error"))
    kept = len(episode.state["items"]["accounts"]["a1"]["log"])  # type: ignore[index]
    assert errors[:kept] == [None] * kept and 0 < kept < 10
    assert all("would pass 300 bytes" in e for e in errors[kept:])
