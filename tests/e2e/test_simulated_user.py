"""End to end: both reference clients play a τ²-retail episode against a real uvicorn, talking
to a simulated customer played by the local chat server; the state lives in the session (a
real Redis for one of them), and the episode's reward is the state_match of its database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._sessions import session_key
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply
from tests.servers import serve_app

KEY = "sk-test-customer"
GREETING = "Hello! How can I help you today?"
CLOSING = "Your exchange is requested. Is there anything else I can help you with?"
OPENING = "Hi, I'm Yusuf Rossi from 19122. I want to exchange items of order #W2378156."


def _customer(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    said = body["messages"][-1]["content"]
    if "anything else" in said:
        return 200, reply("No, that's all, thanks! ###STOP###"), {}
    if said == "empty please":
        return 200, reply("   "), {}  # not a turn: asked again, never cached
    return 200, reply(OPENING), {}


@pytest.fixture(scope="module")
def customer() -> Iterator[ChatServer]:
    with ChatServer(_customer) as server:
        yield server


def _retail(base_url: str) -> Environment:
    text = (ENVS / "tau2_retail.yaml").read_text().replace("https://api.openai.com/v1", base_url)
    text = text.replace("max_turns: 30", "max_turns: 30\n  max_retries: 1\n  backoff: 0")
    return Environment(parse_spec(text, file="tau2_retail.yaml", base_dir=ENVS))


@pytest.fixture(scope="module")
def url(customer: ChatServer) -> Iterator[str]:
    with serve_app(create_app([_retail(customer.base_url)], ServerSettings(ping_interval=0.2))) as base:
        yield base


@pytest.fixture
def redis_backed(customer: ChatServer, redis_url: str) -> Iterator[str]:
    settings = ServerSettings(ping_interval=0.2, store=redis_url)
    with serve_app(create_app([_retail(customer.base_url)], settings)) as base:
        yield base


def _gold() -> list[dict[str, Any]]:
    env = _retail("http://127.0.0.1:9")  # the gold is not served: read it from the data
    return json.loads(env.split("train").task(0)["actions"])


def _messages(url: str, sid: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/tau2_retail/messages", headers={"X-Session-ID": sid})
    assert response.status_code == 200, response.text
    return response.json()


def test_ors_sdk_plays_with_a_simulated_customer_and_the_state_in_redis(
    redis_backed: str, customer: ChatServer, redis_url: str
) -> None:
    import redis
    from ors.client import ORS

    url, gold = redis_backed, _gold()
    seen = len(customer.requests)
    with ORS(base_url=url) as client:
        env = client.environment("tau2_retail")
        with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
            first = s.call_tool("send_message", {"message": GREETING})
            assert (first.blocks[0].text, first.reward, first.finished) == (OPENING, None, False)
            for call in gold:
                out = s.call_tool(call["name"], call["arguments"])
                assert out.reward is None and not out.finished
            size = redis.Redis.from_url(redis_url).strlen("eb:s:" + session_key("addr:127.0.0.1", s.sid))
            assert 0 < size < 64_000  # the changes, not the 2.8 MB database
            last = s.call_tool("send_message", {"message": CLOSING})
            assert last.finished is True and last.reward == 1.0
            assert last.blocks[0].text.startswith(
                "No, that's all, thanks!\n\n[The user ended the conversation."
            )
            assert "###STOP###" not in last.blocks[0].text
            messages = _messages(url, s.sid)
    requests = customer.requests[seen:]
    assert len(requests) == 2
    system = requests[0]["messages"][0]
    assert system["role"] == "system" and "order #W2378156" in system["content"]
    assert "Yusuf Rossi" in system["content"] and "###STOP###" in system["content"]
    # The customer model sees the agent's messages as the user's, its own as the assistant's.
    assert [m["role"] for m in requests[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert requests[1]["messages"][1:] == [
        {"role": "user", "content": GREETING},
        {"role": "assistant", "content": OPENING},
        {"role": "user", "content": CLOSING},
    ]
    assert {h["authorization"] for h in customer.headers_seen[seen:]} == {f"Bearer {KEY}"}
    # /messages: the prompt, then each call and its result; the customer's turns are results.
    results = [
        m["blocks"][0] for m in messages if m["role"] == "user" and m["blocks"][0]["type"] == "tool_result"
    ]
    assert results[0]["blocks"][0]["text"] == OPENING and len(results) == len(gold) + 2


def test_openreward_plays_and_a_missing_change_scores_zero(url: str, customer: ChatServer) -> None:
    from openreward import EnvironmentsAPI

    gold = _gold()
    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="tau2_retail", variant="tau2_retail")
    with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
        assert "send_message" in [t.name for t in s.list_tools()]
        out = s.call_tool("send_message", {"message": GREETING})
        assert out.blocks[0].text == OPENING
        for call in gold:
            s.call_tool(call["name"], call["arguments"])
        last = s.call_tool("send_message", {"message": CLOSING})
        assert (last.reward, last.finished) == (1.0, True)
        assert [m["role"] for m in s.get_messages(format="openai")][:2] == ["system", "user"]
    with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
        s.call_tool("send_message", {"message": GREETING})
        for call in gold[:-1]:  # the exchange is never made
            s.call_tool(call["name"], call["arguments"])
        last = s.call_tool("send_message", {"message": CLOSING})
        assert (last.reward, last.finished) == (0.0, True)
        assert last.metadata["graders"][0]["outcome"] == "incorrect"
        assert "diff" not in last.metadata["graders"][0]  # the gold state is not shown


def test_a_reply_that_is_not_a_turn_is_retried_and_not_cached(url: str, customer: ChatServer) -> None:
    from ors.client import ORS

    seen = len(customer.requests)
    with ORS(base_url=url) as client:
        env = client.environment("tau2_retail")
        for _ in range(2):
            with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
                out = s.call_tool("send_message", {"message": "empty please"})
                assert out.finished is False and out.reward is None
                assert out.blocks[0].text.startswith("Error: the simulated user gave no turn")
                assert out.metadata["error"]
    # Each episode asked twice (one retry), and nothing was cached in between.
    assert len(customer.requests) - seen == 4


def _moody(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A customer endpoint that refuses some messages (400: the request is refused, never
    retried) and is busy for others (503: retried), and otherwise plays the scripted customer."""
    said = body["messages"][-1]["content"]
    if "refuse me" in said:
        return 400, {"error": {"message": "refused by the provider's content filter"}}, {}
    if "busy" in said:
        return 503, {"error": {"message": "overloaded"}}, {"retry-after": "0"}
    return _customer(body, index)


def test_a_user_endpoint_that_keeps_failing_ends_the_episode_void_within_a_bound() -> None:
    """Replies the user's endpoint refuses are not turns, but they count: an episode whose user
    fails three times ends with no reward (never 0: the failure is not the agent's), after a
    bounded number of requests, however many messages the agent sends."""
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    gold = _gold()
    with ChatServer(_moody) as moody, serve_app(create_app([_retail(moody.base_url)])) as url:
        api = EnvironmentsAPI(base_url=url, api_key=None)
        env = api.get(name="tau2_retail", variant="tau2_retail")
        with env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
            out = s.call_tool("send_message", {"message": "busy, sorry"})  # one failure: send again
            assert (out.finished, out.reward) == (False, None) and out.metadata["error"]
            assert s.call_tool("send_message", {"message": GREETING}).blocks[0].text == OPENING
            for call in gold:
                s.call_tool(call["name"], call["arguments"])
            last = s.call_tool("send_message", {"message": CLOSING})
            assert (last.reward, last.finished) == (1.0, True)
        seen = len(moody.requests)
        with ORS(base_url=url) as client:
            ors_env = client.environment("tau2_retail")
            with ors_env.session(split="train", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
                outs = []
                for _ in range(40):  # an agent that keeps sending
                    outs.append(s.call_tool("send_message", {"message": f"refuse me {len(outs)}"}))
                    if outs[-1].finished:
                        break
        assert [o.finished for o in outs] == [False, False, True]
        assert [o.reward for o in outs] == [None, None, None]
        metadata = outs[-1].metadata
        assert metadata["outcome"] == "ungradeable" and metadata["user_failures"] == 3
        assert metadata["reason"].startswith("the simulated user failed 3 times, so the episode ends void")
        assert "refused by the provider's content filter" in metadata["reason"]
        assert len(moody.requests) - seen == 3  # refusals are not retried: one request each
