"""A scripted customer for envs/phone_support.yaml (dual control), as a chat-server handler: it
does what the agent's last message asks with its phone tools (the setting it names, ``on`` or
``off``), then looks at its status bar, then says what it sees; it ends the chat when asked
whether there is anything else. Used by the dual-control tests and bench/agents.py."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.chat_server import reply

__all__ = ["CLOSING", "OPENING", "SETTINGS", "USER_TOOLS", "customer", "guidance"]

OPENING = "Hi, my phone has had no signal and no internet since this morning."
CLOSING = "Is there anything else I can help you with?"
SETTINGS = {"airplane": "set_airplane_mode", "mobile data": "set_mobile_data", "roaming": "set_data_roaming"}
USER_TOOLS = frozenset({"check_status_bar", *SETTINGS.values()})
_WORDS = {tool: words for words, tool in SETTINGS.items()}


def guidance(name: str, arguments: dict[str, Any]) -> str:
    """What an agent says to make the customer make the gold call ``name(arguments)``."""
    words = {"airplane": "airplane mode", "mobile data": "mobile data", "roaming": "data roaming"}
    return f"Please turn {words[_WORDS[name]]} {'on' if arguments['enabled'] else 'off'}."


def customer(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    messages = body["messages"]
    last_agent = max(i for i, m in enumerate(messages) if m["role"] == "user")
    said, after = messages[last_agent]["content"], messages[last_agent + 1 :]
    if "anything else" in said.lower():
        return 200, reply("No, that's all, thank you! ###STOP###"), {}
    asked = [tool for words, tool in SETTINGS.items() if words in said.lower()]
    if not asked:
        return 200, reply(OPENING), {}
    done = [c["function"]["name"] for m in after if m["role"] == "assistant" for c in m["tool_calls"]]
    if not done:
        enabled = said.lower().rstrip(". !").endswith(" on")
        arguments = json.dumps({"enabled": enabled})
        return (
            200,
            reply(
                None,
                [{"id": "c1", "type": "function", "function": {"name": asked[0], "arguments": arguments}}],
            ),
            {},
        )
    if "check_status_bar" not in done:
        look = {"id": "c2", "type": "function", "function": {"name": "check_status_bar", "arguments": "{}"}}
        return 200, reply(None, [look]), {}
    return 200, reply(f"Done. My status bar shows: {after[-1]['content']}"), {}
