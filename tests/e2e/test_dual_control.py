"""End to end, dual control: both reference clients play envs/phone_support.yaml against a real
uvicorn, with the customer played by the local chat server. The customer has tools of its own
(its phone's settings) that the agent never sees; it calls them through tool calls in its chat
completions, and the reward is the state_match of the account and the phone, so only guidance
that makes the customer change the right setting earns 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes import phone_customer
from tests.fakes.chat_server import ChatServer
from tests.fakes.phone_customer import CLOSING, OPENING, USER_TOOLS
from tests.servers import serve_app

KEY = "sk-test-customer"
GREETING = "Hello! This is support. How can I help?"


@pytest.fixture(scope="module")
def customer() -> Iterator[ChatServer]:
    with ChatServer(phone_customer.customer) as server:
        yield server


def _phone_support(base_url: str) -> Environment:
    text = (ENVS / "phone_support.yaml").read_text().replace("https://api.openai.com/v1", base_url)
    text = text.replace("max_turns: 20", "max_turns: 20\n  max_retries: 1\n  backoff: 0\n  cache: false")
    return Environment(parse_spec(text, file="phone_support.yaml", base_dir=ENVS))


@pytest.fixture(scope="module")
def url(customer: ChatServer) -> Iterator[str]:
    app = create_app([_phone_support(customer.base_url)], ServerSettings(ping_interval=0.2))
    with serve_app(app) as base:
        yield base


def _messages(url: str, sid: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/phone_support/messages", headers={"X-Session-ID": sid})
    assert response.status_code == 200, response.text
    return response.json()


def test_ors_sdk_guides_the_customer_to_turn_airplane_mode_off(url: str, customer: ChatServer) -> None:
    from ors.client import ORS, ToolCallError

    seen = len(customer.requests)
    with ORS(base_url=url) as client:
        env = client.environment("phone_support")
        listed = {t.name for t in env.list_tools()}
        assert "send_message" in listed and "get_line_details" in listed
        assert not listed & USER_TOOLS  # the customer's tools are never offered to the agent
        with env.session(split="test", index=0, secrets={"OPENAI_API_KEY": KEY}) as s:
            assert not {t.name for t in s.list_tools()} & USER_TOOLS
            first = s.call_tool("send_message", {"message": GREETING})
            assert (first.blocks[0].text, first.reward, first.finished) == (OPENING, None, False)
            # The agent cannot touch the phone: the customer's tools are not its tools.
            with pytest.raises(ToolCallError, match="'set_airplane_mode' is not a valid tool"):
                s.call_tool("set_airplane_mode", {"enabled": False})
            line = s.call_tool("get_line_details", {"phone_number": "555-0101"})
            assert json.loads(line.blocks[0].text)["status"] == "active"
            fixed = s.call_tool("send_message", {"message": "Please turn airplane mode off."})
            assert fixed.finished is False and fixed.reward is None
            assert fixed.metadata["user_actions"] == ["set_airplane_mode", "check_status_bar"]
            assert '"airplane_mode":false' in fixed.blocks[0].text
            last = s.call_tool("send_message", {"message": CLOSING})
            assert (last.finished, last.reward) == (True, 1.0)
            messages = _messages(url, s.sid)
    # /messages is the agent's conversation: its own calls only, never the customer's.
    called = [b["name"] for m in messages for b in m["blocks"] if b["type"] == "tool_call"]
    assert called == ["send_message", "get_line_details", "send_message", "send_message"]
    requests = customer.requests[seen:]
    assert len(requests) == 5  # opening; the setting, the status bar, the reply; the goodbye
    offered = {t["function"]["name"] for t in requests[1]["tools"]}
    assert offered == USER_TOOLS
    # The customer's own calls and their results come back to it in the chat wire format, with
    # the transcript's ids, and stay in its conversation on the next turn.
    roles = [m["role"] for m in requests[4]["messages"]]
    turn_one = ["system", "user", "assistant"]
    turn_two = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert roles == [*turn_one, *turn_two, "user"]
    call = requests[4]["messages"][4]["tool_calls"][0]
    assert call["function"] == {"name": "set_airplane_mode", "arguments": '{"enabled": false}'}
    assert requests[4]["messages"][5]["tool_call_id"] == call["id"] and call["id"].startswith("call_")
    assert "Use them only when the agent asks you" in requests[0]["messages"][0]["content"]


def test_openreward_right_guidance_earns_1_and_wrong_guidance_0(url: str) -> None:
    from openreward import EnvironmentsAPI

    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="phone_support", variant="phone_support")

    def play(index: int, guidance: list[str], agent_calls: list[tuple[str, dict[str, Any]]]) -> Any:
        with env.session(split="test", index=index, secrets={"OPENAI_API_KEY": KEY}) as s:
            assert not {t.name for t in s.list_tools()} & USER_TOOLS
            assert s.call_tool("send_message", {"message": GREETING}).blocks[0].text == OPENING
            for name, arguments in agent_calls:
                s.call_tool(name, arguments)
            for text in guidance:
                out = s.call_tool("send_message", {"message": text})
                assert out.finished is False, out
            return s.call_tool("send_message", {"message": CLOSING})

    # Abroad, with roaming off on the account and on the phone: both sides must act.
    both = play(3, ["Please turn data roaming on."], [("enable_roaming", {"phone_number": "555-0104"})])
    assert (both.reward, both.finished) == (1.0, True)
    # The agent's side alone is not enough: the phone still has data roaming off.
    alone = play(3, [], [("enable_roaming", {"phone_number": "555-0104"})])
    assert (alone.reward, alone.finished) == (0.0, True)
    # Wrong guidance: the customer turns mobile data off, and airplane mode stays on.
    wrong = play(0, ["Please turn mobile data off."], [])
    assert (wrong.reward, wrong.finished) == (0.0, True)
    assert wrong.metadata["outcome"] == "incorrect"
    assert wrong.metadata.get("user_actions") is None  # nothing done on the closing turn
    assert "diff" not in wrong.metadata  # the gold state is not shown
