"""An episode the environment ends is a state of the session (``session.finished``), never an
exception on the next call: a scripted user loops ``while not session.finished``, against a
real uvicorn serving τ²-retail whose customer (the local chat server) ends the conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.client import AsyncClient, Client
from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply
from tests.servers import serve_app

KEY = "sk-test-customer"
OPENING = "Hi, I'm Yusuf Rossi from 19122. I want to exchange items of order #W2378156."


def _customer(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    said = body["messages"][-1]["content"]
    if "anything else" in said:
        return 200, reply("No, that's all, thanks! ###STOP###"), {}
    return 200, reply(OPENING), {}


@pytest.fixture(scope="module")
def customer() -> Iterator[ChatServer]:
    with ChatServer(_customer) as server:
        yield server


@pytest.fixture(scope="module")
def url(customer: ChatServer) -> Iterator[str]:
    text = (ENVS / "tau2_retail.yaml").read_text().replace("https://api.openai.com/v1", customer.base_url)
    text = text.replace("max_turns: 30", "max_turns: 30\n  max_retries: 1\n  backoff: 0")
    env = Environment(parse_spec(text, file="tau2_retail.yaml", base_dir=ENVS))
    with serve_app(create_app([env], ServerSettings(ping_interval=0.2))) as base:
        yield base


def _gold() -> list[dict[str, Any]]:
    from envbuilder.environment import load_environment

    return json.loads(load_environment(ENVS / "tau2_retail.yaml").split("train").task(0)["actions"])


#: What the scripted agent says, in order; the customer ends the conversation after the second.
SCRIPT = ["Hello! How can I help you today?", "Done. Is there anything else I can help you with?", "Bye"]


def test_a_scripted_user_loops_until_the_session_is_finished(url: str, customer: ChatServer) -> None:
    gold = _gold()
    with (
        Client(url) as client,
        client.environment("tau2_retail").session(
            split="train", index=0, secrets={"OPENAI_API_KEY": KEY}
        ) as session,
    ):
        said: list[str] = []
        script = iter(SCRIPT)
        assert session.finished is False and session.reward is None
        while not session.finished:
            out = session.call_tool("send_message", {"message": next(script)})
            said.append(out.blocks[0].text)
            if not session.finished and len(said) == 1:
                for call in gold:
                    session.call_tool(call["name"], call["arguments"])
        assert len(said) == 2 and said[0] == OPENING
        assert (out.finished, out.reward, session.reward) == (True, 1.0, 1.0)
        # A call after the end is a state too: not run (the customer is not asked), no reward.
        asked = len(customer.requests)
        after = session.call_tool("send_message", {"message": "Still there?"})
        assert (after.finished, after.reward, after.metadata) == (True, None, {"not_run": "episode_finished"})
        assert after.blocks[0].text == "'send_message' was not run: the episode has finished."
        assert len(customer.requests) == asked
        assert session.reward == 1.0


async def test_the_async_session_is_finished_too(url: str) -> None:
    async with AsyncClient(url) as client:
        env = client.environment("tau2_retail")
        async with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as session:
            rewards = []
            for message in SCRIPT:
                if session.finished:
                    break
                out = await session.call_tool("send_message", {"message": message})
                rewards.append(out.reward)
            assert session.finished and rewards == [None, 0.0] and session.reward == 0.0
            again = await session.call_tool("get_user_details", {"user_id": "yusuf_rossi_9620"})
            assert (again.finished, again.reward) == (True, None)
            # Rewards a trainer sums: the not-run calls add nothing (sum == last non-null).
            assert sum(r for r in [*rewards, again.reward] if r is not None) == session.reward


def test_an_episode_ended_behind_the_clients_back_is_a_state(gsm8k_url: str) -> None:
    """Another process (here raw HTTP with the same session id) finished the episode: the
    server refuses the next call with `episode_finished`, and the session turns finished."""
    with Client(gsm8k_url) as client, client.environment("gsm8k").session(split="test", index=0) as session:
        assert session.sid is not None
        answered = httpx.post(
            f"{gsm8k_url}/gsm8k/call",
            json={"name": "submit", "input": {"answer": "0"}},
            headers={"X-Session-ID": session.sid, "Accept": "text/event-stream"},
        )
        assert answered.status_code == 200 and '"finished":true' in answered.text.replace(" ", "")
        assert session.finished is False  # the client has not seen it yet
        out = session.call_tool("submit", {"answer": "18"})
        assert (out.finished, out.reward, out.metadata) == (True, None, {"not_run": "episode_finished"})
        assert session.finished is True and session.reward is None


def test_the_documented_loop_runs(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.docs.pages import blocks, page, section

    [code] = blocks(section(page("how-to/python-client.md"), "## An episode the environment ends"), "python")
    exec(code.replace("http://127.0.0.1:8080", url).replace("sk-...", KEY), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == OPENING
    assert printed[1].startswith("No, that's all, thanks!")
    assert printed[-1] == "0.0"  # the customer asked for an exchange that was never made
