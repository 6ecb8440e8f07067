"""Answers in the wire formats of the Anthropic Messages API and the OpenAI Responses API, for a
``ChatServer(handler, route="/messages" | "/responses")``, and readers of their requests."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["anthropic_reply", "first_user_text", "responses_reply"]


def anthropic_reply(
    text: str | None = None, tool: tuple[str, dict[str, Any]] | None = None, usage: tuple[int, int] = (11, 7)
) -> dict[str, Any]:
    """A Messages API answer: a text block and/or one ``tool_use`` block."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool is not None:
        content.append({"type": "tool_use", "id": "toolu_01", "name": tool[0], "input": tool[1]})
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
        "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }  # fmt: skip


def responses_reply(
    text: str | None = None, tool: tuple[str, dict[str, Any]] | None = None, usage: tuple[int, int] = (13, 3)
) -> dict[str, Any]:
    """A Responses API answer: a message item and/or one ``function_call`` item."""
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})  # fmt: skip
    if tool is not None:
        output.append({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": tool[0],
                       "arguments": json.dumps(tool[1]), "status": "completed"})  # fmt: skip
    return {
        "id": "resp_1", "object": "response", "status": "completed", "output": output,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)},
    }  # fmt: skip


def first_user_text(request: dict[str, Any]) -> str:
    """The text of the first user turn of a Messages or Responses request (the task's prompt)."""
    turns = request.get("messages") or request.get("input") or []
    for turn in turns:
        if turn.get("role") != "user":
            continue
        content = turn.get("content")
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
