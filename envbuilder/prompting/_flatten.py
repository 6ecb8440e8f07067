"""A conversation flattened to prompt blocks for ``/prompt``, exactly as the reference SDK does.

docs/protocol.md §7.2 (``openreward.environments.utils.flatten_messages``): one plain user message
flattens to its blocks verbatim; anything else gets a ``[role]`` header before each message's
blocks, and rich blocks render to text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from envbuilder.protocol import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["flatten_messages"]


def _flatten_block(block: object) -> list[ContentBlock]:
    if isinstance(block, ReasoningBlock):
        return [TextBlock(text=f"<think>{block.text}</think>", detail={"type": "reasoning"})]
    if isinstance(block, ToolCallBlock):
        return [
            TextBlock(
                text=f"[tool_call {block.name}] {json.dumps(dict(block.input))}",
                detail={"type": "tool_call", "id": block.id},
            )
        ]
    if isinstance(block, ToolResultBlock):
        header = TextBlock(
            text="[tool_result (error)]" if block.is_error else "[tool_result]",
            detail={"type": "tool_result", "tool_call_id": block.tool_call_id},
        )
        return [header, *block.blocks]
    assert isinstance(block, TextBlock | ImageBlock)
    return [block]


def flatten_messages(messages: Sequence[Message]) -> list[ContentBlock]:
    """The prompt blocks a legacy ``/prompt`` consumer sees for ``messages``."""
    if (
        len(messages) == 1
        and messages[0].role == "user"
        and all(isinstance(b, TextBlock | ImageBlock) for b in messages[0].blocks)
    ):
        return list(messages[0].blocks)  # type: ignore[arg-type]
    out: list[ContentBlock] = []
    for msg in messages:
        out.append(TextBlock(text=f"[{msg.role}]", detail={"role": msg.role}))
        for block in msg.blocks:
            out.extend(_flatten_block(block))
    return out
