"""Provider conversions of conversations and tool listings, without a server."""

from __future__ import annotations

import pytest

from envbuilder.client import convert_messages, convert_tools
from envbuilder.client._formats import parse_messages
from envbuilder.protocol import Message, ToolSpec

# docs/protocol.md §7.1: a conversation with reasoning, a tool call and its result.
CONVERSATION = [
    {"role": "system", "blocks": [{"text": "You are a careful assistant.", "type": "text"}]},
    {"role": "user", "blocks": [{"text": "What is 6*7? Use the calculator.", "type": "text"}]},
    {
        "role": "assistant",
        "blocks": [
            {"text": "I should call the calculator.", "signature": None, "type": "reasoning"},
            {"text": "Let me compute that.", "type": "text"},
            {"id": "call_1", "name": "calculator", "input": {"expr": "6*7"}, "type": "tool_call"},
        ],
    },
    {
        "role": "user",
        "blocks": [
            {
                "tool_call_id": "call_1",
                "blocks": [{"text": "42", "type": "text"}],
                "is_error": False,
                "type": "tool_result",
            },
            {"text": "Now give the final answer.", "type": "text"},
        ],
    },
]
IMAGE = {"data": "aGk=", "mimeType": "image/png", "type": "image"}


def msgs(raw=CONVERSATION) -> list[Message]:
    return parse_messages(raw)


def test_none_is_the_canonical_messages() -> None:
    assert convert_messages(msgs()) == msgs()


@pytest.mark.parametrize("format", ["openai", "openrouter"])
def test_openai(format) -> None:
    assert convert_messages(msgs(), format) == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What is 6*7? Use the calculator."},
        {
            "role": "assistant",
            "content": "Let me compute that.",
            "reasoning_content": "I should call the calculator.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expr": "6*7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "user", "content": "Now give the final answer."},
    ]


def test_openai_images_become_data_urls_and_tool_calls_only_give_null_content() -> None:
    converted = convert_messages(
        msgs(
            [
                {"role": "user", "blocks": [{"text": "look", "type": "text"}, IMAGE]},
                {"role": "assistant", "blocks": [{"id": "c", "name": "f", "input": {}, "type": "tool_call"}]},
            ]
        ),
        "openai",
    )
    assert converted[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
    ]
    assert converted[1]["content"] is None


def test_anthropic() -> None:
    assert convert_messages(msgs(), "anthropic") == {
        "system": "You are a careful assistant.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is 6*7? Use the calculator."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should call the calculator."},
                    {"type": "text", "text": "Let me compute that."},
                    {"type": "tool_use", "id": "call_1", "name": "calculator", "input": {"expr": "6*7"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": [{"type": "text", "text": "42"}],
                    },
                    {"type": "text", "text": "Now give the final answer."},
                ],
            },
        ],
    }


def test_anthropic_tool_results_go_first_signature_and_is_error_kept() -> None:
    converted = convert_messages(
        msgs(
            [
                {"role": "assistant", "blocks": [{"text": "t", "signature": "sig", "type": "reasoning"}]},
                {
                    "role": "user",
                    "blocks": [
                        {"text": "before", "type": "text"},
                        {"tool_call_id": "c", "blocks": [IMAGE], "is_error": True, "type": "tool_result"},
                    ],
                },
            ]
        ),
        "anthropic",
    )
    assert converted["system"] is None
    assert converted["messages"][0]["content"] == [{"type": "thinking", "thinking": "t", "signature": "sig"}]
    first, second = converted["messages"][1]["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "c",
        "is_error": True,
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}
        ],
    }
    assert second == {"type": "text", "text": "before"}


def test_google_raises_on_reasoning_and_converts_the_rest() -> None:
    with pytest.raises(ValueError, match="no input representation for reasoning"):
        convert_messages(msgs(), "google")
    without = [dict(m, blocks=[b for b in m["blocks"] if b["type"] != "reasoning"]) for m in CONVERSATION]
    assert convert_messages(msgs(without), "google") == {
        "system_instruction": "You are a careful assistant.",
        "contents": [
            {"role": "user", "parts": [{"text": "What is 6*7? Use the calculator."}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Let me compute that."},
                    {"function_call": {"name": "calculator", "args": {"expr": "6*7"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "calculator", "response": {"output": "42"}}},
                    {"text": "Now give the final answer."},
                ],
            },
        ],
    }


@pytest.mark.parametrize(
    ("raw", "format", "match"),
    [
        (
            [{"role": "user", "blocks": [{"tool_call_id": "c", "blocks": [IMAGE], "type": "tool_result"}]}],
            "openai",
            "cannot carry an image inside a tool result",
        ),
        (
            [{"role": "user", "blocks": [{"tool_call_id": "zz", "blocks": [], "type": "tool_result"}]}],
            "google",
            "no matching tool_call",
        ),
        (
            [
                {"role": "user", "blocks": [{"text": "a", "type": "text"}]},
                {"role": "system", "blocks": [{"text": "late", "type": "text"}]},
            ],
            "anthropic",
            "system message after the first non-system turn",
        ),
        ([{"role": "system", "blocks": [IMAGE]}], "google", "system messages must be text-only"),
        ([{"role": "user", "blocks": [{"text": "a", "type": "text"}]}], "gemini", "unknown format"),
    ],
)
def test_what_a_format_cannot_represent_raises(raw, format, match) -> None:
    with pytest.raises(ValueError, match=match):
        convert_messages(msgs(raw), format)


def test_unknown_block_types_from_a_newer_server_are_skipped() -> None:
    parsed = parse_messages(
        [{"role": "user", "blocks": [{"type": "audio", "data": "x"}, {"text": "hi", "type": "text"}]}]
    )
    assert [b.type for b in parsed[0].blocks] == ["text"]


SCHEMA = {
    "title": "SubmitInput",
    "type": "object",
    "required": ["answer"],
    "additionalProperties": False,
    "properties": {
        "answer": {"title": "Answer", "type": "string", "default": "0", "description": "d"},
        "title": {"anyOf": [{"type": "null"}, {"type": "array"}], "description": "a field named title"},
    },
}
TOOLS = [
    ToolSpec(name="submit", description="Submit.", input_schema=SCHEMA),
    ToolSpec(name="hint", description="", input_schema=None),
]


def test_tool_formats() -> None:
    props = {
        "answer": {"type": "string", "default": "0", "description": "d"},
        "title": {"description": "a field named title", "type": "array", "items": {}},
    }
    openai_params = {"type": "object", "required": ["answer"], "properties": props}
    assert convert_tools(TOOLS, "openai") == [
        {"type": "function", "name": "submit", "description": "Submit.", "parameters": openai_params},
        {"type": "function", "name": "hint", "description": "", "parameters": None},
    ]
    assert convert_tools(TOOLS, "openrouter")[0] == {
        "type": "function",
        "function": {"name": "submit", "description": "Submit."},
        "parameters": openai_params,
    }
    assert convert_tools(TOOLS, "chat_completions") == [
        {
            "type": "function",
            "function": {"name": "submit", "description": "Submit.", "parameters": openai_params},
        },
        {
            "type": "function",
            "function": {
                "name": "hint",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    anthropic = convert_tools(TOOLS, "anthropic")
    assert anthropic[0]["type"] == "custom" and "title" not in anthropic[0]["input_schema"]
    assert anthropic[0]["input_schema"]["additionalProperties"] is False
    assert anthropic[1]["input_schema"] == {"type": "object", "properties": {}}
    assert convert_tools(TOOLS, "google")[0]["parameters"] == {
        "type": "object",
        "required": ["answer"],
        "properties": {
            "answer": {"type": "string", "description": "d"},
            "title": {"description": "a field named title"},
        },
    }
    assert convert_tools(TOOLS) == TOOLS
    with pytest.raises(ValueError, match="unknown format"):
        convert_tools(TOOLS, "mistral")  # type: ignore[arg-type]
