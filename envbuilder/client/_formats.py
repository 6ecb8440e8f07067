"""Conversations and tool listings in each model provider's shape; usable without a server.

Messages (``convert_messages``), following the openreward client's tables:

==================  ==================================================================
format              result
==================  ==================================================================
None                the canonical ``list[Message]`` unchanged
openai, openrouter  a chat-completions message list; reasoning → ``reasoning_content``,
                    tool calls → ``tool_calls``, each tool result → its own ``tool``
                    message (text only: an image there raises); system stays in place
anthropic           ``{"system": str|None, "messages": [...]}``: leading system turns
                    hoisted; ``thinking``/``tool_use``/``tool_result`` blocks
google              ``{"system_instruction": str|None, "contents": [...]}``: assistant →
                    ``model``; ``function_call``/``function_response`` parts; reasoning raises
==================  ==================================================================

Whatever a format cannot represent raises ``ValueError``; nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from envbuilder.client._errors import ClientError
from envbuilder.protocol import (
    MESSAGE_BLOCK_TYPES,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
    check_placement,
)

__all__ = ["Format", "ToolFormat", "convert_messages", "convert_tools", "parse_messages"]

Format = Literal["openai", "openrouter", "anthropic", "google"]
#: ``chat_completions`` is envbuilder's addition: the nested shape ``/v1/chat/completions`` takes.
ToolFormat = Literal["openai", "openrouter", "anthropic", "google", "chat_completions"]

_KNOWN_BLOCKS = frozenset(MESSAGE_BLOCK_TYPES)


def _known(blocks: Iterable[Any]) -> list[Any]:
    out = []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in _KNOWN_BLOCKS:
            continue  # a block type from a newer server: skipped (lossy but safe)
        if block["type"] == "tool_result":
            block = {
                **block,
                "blocks": [b for b in _known(block.get("blocks", ())) if b["type"] in ("text", "image")],
            }
        out.append(block)
    return out


def parse_messages(raw: Any) -> list[Message]:
    """``/messages`` JSON → Messages, skipping block types this client does not know."""
    if not isinstance(raw, list):
        raise ClientError(f"/messages answered {type(raw).__name__}, expected a list of messages")
    try:
        return [Message.model_validate({**m, "blocks": _known(m.get("blocks", ()))}) for m in raw]
    except (ValidationError, AttributeError, TypeError) as exc:
        raise ClientError(f"/messages answered messages this client cannot read: {exc}") from None


def convert_messages(messages: Sequence[Message], format: Format | None = None) -> Any:
    """Convert a conversation to ``format`` (see the module docstring); ValueError if it can't."""
    if format is None:
        return list(messages)
    for message in messages:  # Messages built with model_construct skip the validator
        check_placement(message.role, (block.type for block in message.blocks))
    if format in ("openai", "openrouter"):
        return _to_openai(messages, format)
    if format == "anthropic":
        return _to_anthropic(messages)
    if format == "google":
        return _to_google(messages)
    raise ValueError(
        f"unknown format {format!r}; expected one of None, 'openai', 'openrouter', 'anthropic', 'google'"
    )


# -- openai -----------------------------------------------------------------------------------


def _openai_content(blocks: Sequence[TextBlock | ImageBlock]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return [
        {"type": "text", "text": b.text}
        if isinstance(b, TextBlock)
        else {"type": "image_url", "image_url": {"url": f"data:{b.mimeType};base64,{b.data}"}}
        for b in blocks
    ]


def _result_text(block: ToolResultBlock, format: str) -> str:
    texts = []
    for inner in block.blocks:
        if isinstance(inner, ImageBlock):
            raise ValueError(
                f"format={format!r} cannot carry an image inside a tool result (tool messages are "
                "text-only there); use format='anthropic' or format=None"
            )
        texts.append(inner.text)
    return "\n".join(texts)


def _to_openai(messages: Sequence[Message], format: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            visible = [b for b in message.blocks if isinstance(b, TextBlock | ImageBlock)]
            entry: dict[str, Any] = {
                "role": "assistant",
                "content": _openai_content(visible) if visible else None,
            }
            reasoning = [b.text for b in message.blocks if isinstance(b, ReasoningBlock)]
            if reasoning:
                entry["reasoning_content"] = "\n\n".join(reasoning)
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": json.dumps(b.input)},
                }
                for b in message.blocks
                if isinstance(b, ToolCallBlock)
            ]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        elif message.role == "user":
            rest: list[Any] = []
            for block in message.blocks:
                if isinstance(block, ToolResultBlock):
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": block.tool_call_id,
                            "content": _result_text(block, format),
                        }
                    )
                else:
                    rest.append(block)
            if rest:
                out.append({"role": "user", "content": _openai_content(rest)})
        else:
            out.append({"role": message.role, "content": _openai_content(message.blocks)})  # type: ignore[arg-type]
    return out


# -- anthropic and google: the system prompt is hoisted -----------------------------------------


def _hoist_system(messages: Sequence[Message], provider: str) -> tuple[str | None, list[Message]]:
    texts: list[str] = []
    rest: list[Message] = []
    for message in messages:
        if message.role != "system":
            rest.append(message)
            continue
        if rest:
            raise ValueError(
                f"{provider} cannot represent a system message after the first non-system turn; "
                "move it to the start of the conversation"
            )
        for block in message.blocks:
            if not isinstance(block, TextBlock):
                raise ValueError(f"{provider} system messages must be text-only (got a {block.type!r} block)")
            texts.append(block.text)
    return ("\n\n".join(texts) if texts else None), rest


def _anthropic_image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mimeType, "data": block.data}}


def _to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    system, rest = _hoist_system(messages, "anthropic")
    out = []
    for message in rest:
        # Anthropic wants tool_result blocks first in a user turn; otherwise keep the order.
        blocks = sorted(message.blocks, key=lambda b: not isinstance(b, ToolResultBlock))
        content: list[dict[str, Any]] = []
        for b in blocks:
            if isinstance(b, TextBlock):
                content.append({"type": "text", "text": b.text})
            elif isinstance(b, ImageBlock):
                content.append(_anthropic_image(b))
            elif isinstance(b, ReasoningBlock):
                thinking: dict[str, Any] = {"type": "thinking", "thinking": b.text}
                if b.signature:
                    thinking["signature"] = b.signature
                content.append(thinking)
            elif isinstance(b, ToolCallBlock):
                content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.input)})
            else:
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": b.tool_call_id,
                    "content": [
                        {"type": "text", "text": i.text} if isinstance(i, TextBlock) else _anthropic_image(i)
                        for i in b.blocks
                    ],
                }
                if b.is_error:
                    result["is_error"] = True
                content.append(result)
        out.append({"role": message.role, "content": content})
    return {"system": system, "messages": out}


def _to_google(messages: Sequence[Message]) -> dict[str, Any]:
    names = {b.id: b.name for m in messages for b in m.blocks if isinstance(b, ToolCallBlock)}
    system, rest = _hoist_system(messages, "google")
    contents = []
    for message in rest:
        parts: list[dict[str, Any]] = []
        for b in message.blocks:
            if isinstance(b, TextBlock):
                parts.append({"text": b.text})
            elif isinstance(b, ImageBlock):
                parts.append({"inline_data": {"mime_type": b.mimeType, "data": b.data}})
            elif isinstance(b, ReasoningBlock):
                raise ValueError(
                    "format='google' has no input representation for reasoning blocks; "
                    "use format=None or format='anthropic'"
                )
            elif isinstance(b, ToolCallBlock):
                parts.append({"function_call": {"name": b.name, "args": dict(b.input)}})
            else:
                if b.tool_call_id not in names:
                    raise ValueError(
                        f"tool_result {b.tool_call_id!r} has no matching tool_call in the conversation; "
                        "format='google' addresses results by function name"
                    )
                parts.append(
                    {
                        "function_response": {
                            "name": names[b.tool_call_id],
                            "response": {"output": _result_text(b, "google")},
                        }
                    }
                )
        contents.append({"role": "model" if message.role == "assistant" else "user", "parts": parts})
    return {"system_instruction": system, "contents": contents}


# -- tools ------------------------------------------------------------------------------------

_OPENAI_DROP = frozenset({"additionalProperties", "patternProperties", "not"})
_GOOGLE_DROP = frozenset(
    {
        "additionalProperties",
        "additional_properties",
        "title",
        "default",
        "examples",
        "example",
        "patternProperties",
        "oneOf",
        "allOf",
        "anyOf",
        "not",
    }
)
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _strip_titles(schema: Any, *, in_map: bool = False) -> Any:
    """Drop ``title`` keywords, keeping properties that happen to be called ``title``."""
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v, in_map=k in _SCHEMA_MAPS and not in_map)
            for k, v in schema.items()
            if in_map or k != "title"
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _openai_schema(schema: Any) -> Any:
    """Collapse anyOf/oneOf/allOf to one option (anyOf: the first non-null) keeping sibling
    keys, drop keywords function calling rejects, give arrays ``items``."""
    if isinstance(schema, list):
        return [_openai_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if not options:
            continue
        chosen = options[0]
        if key == "anyOf":
            chosen = next(
                (o for o in options if not (isinstance(o, dict) and o.get("type") == "null")), options[0]
            )
        if not isinstance(chosen, dict):
            return _openai_schema(chosen)
        siblings = {k: v for k, v in schema.items() if k != key}
        return _openai_schema({**siblings, **chosen})
    out = {
        k: {name: _openai_schema(sub) for name, sub in v.items()}
        if k in _SCHEMA_MAPS and isinstance(v, dict)
        else _openai_schema(v)
        for k, v in schema.items()
        if k not in _OPENAI_DROP
    }
    kind = out.get("type")
    if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in out:
        out["items"] = {}
    return out


def _google_schema(schema: Any, *, in_map: bool = False) -> Any:
    """Drop keywords Gemini rejects; rename ``$ref``/``$defs``. Property names are kept."""
    if isinstance(schema, list):
        return [_google_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    if in_map:
        return {k: _google_schema(v) for k, v in schema.items()}
    renamed = {"$ref": "ref", "$defs": "defs"}
    return {
        renamed.get(k, k): _google_schema(v, in_map=k in _SCHEMA_MAPS)
        for k, v in schema.items()
        if k not in _GOOGLE_DROP
    }


def convert_tools(tools: Sequence[ToolSpec], format: ToolFormat | None = None) -> list[Any]:
    """Tool specs in a provider's shape (as the reference clients build them), or unchanged.

    ``chat_completions`` gives ``{"type": "function", "function": {name, description,
    parameters}}``, what OpenAI-compatible ``/chat/completions`` endpoints accept.
    """
    if format is None:
        return list(tools)
    if format not in ("openai", "openrouter", "anthropic", "google", "chat_completions"):
        raise ValueError(
            f"unknown format {format!r}; expected one of None, 'openai', 'openrouter', "
            "'anthropic', 'google', 'chat_completions'"
        )
    out: list[Any] = []
    for tool in tools:
        meta = {"name": tool.name, "description": tool.description}
        raw = tool.input_schema
        schema = _strip_titles(raw) if raw else None
        if format in ("openai", "openrouter", "chat_completions"):
            params = _openai_schema(schema) if schema else None
            if format == "openai":
                out.append({"type": "function", **meta, "parameters": params})
            elif format == "openrouter":
                out.append({"type": "function", "function": meta, "parameters": params})
            else:
                out.append(
                    {
                        "type": "function",
                        "function": {**meta, "parameters": params or {"type": "object", "properties": {}}},
                    }
                )
        elif format == "anthropic":
            out.append(
                {"type": "custom", **meta, "input_schema": schema or {"type": "object", "properties": {}}}
            )
        else:
            out.append({**meta, "parameters": _google_schema(schema) if schema else None})
    return out
