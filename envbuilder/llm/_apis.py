"""The Anthropic Messages API and the OpenAI Responses API, behind the chat-completions interface.

The agent loop speaks chat completions (messages with ``tool_calls`` and ``tool`` results);
each class here translates a request into its API's wire format and the answer back, so the
loop, the records and the usage counts are the same whichever ``--api`` is chosen. Text content
is translated; other content parts (images) are refused with a clear error rather than dropped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from envbuilder.errors import EnvbuilderError, did_you_mean
from envbuilder.llm._model import ChatModel, ModelError

if TYPE_CHECKING:
    import httpx

__all__ = ["APIS", "AnthropicModel", "ResponsesModel", "model_class"]

#: Anthropic requires ``max_tokens``; used when ``--max-tokens`` is not given.
ANTHROPIC_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"


def _text(content: Any) -> str:
    """A chat message's content as text (a list of text parts is joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        else:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ModelError(
                f"content of type {kind!r} is not supported by this --api yet", reason="unsupported content"
            )
    return "\n".join(parts)


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions tools → ``{name, description, parameters}``."""
    out = []
    for tool in tools:
        fn = tool.get("function") or {}
        out.append({"name": fn.get("name"), "description": fn.get("description") or "",
                    "parameters": fn.get("parameters") or {"type": "object", "properties": {}}})  # fmt: skip
    return out


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"_raw": raw}  # the model's invalid JSON, kept visible rather than dropped
    return raw or {}


def _chat_reply(
    text: str | None, calls: list[dict[str, Any]], prompt: int, completion: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _listed(
    model: ChatModel, response: httpx.Response, key: str, api: str
) -> tuple[dict[str, Any], list[Any]]:
    """The answer's JSON object and its list under ``key``; a ModelError when it has none."""
    try:
        data = response.json()
        items = data[key]
        if not isinstance(items, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ModelError(
            model._redact(f"{api} answer has no {key} list: {response.text[:300]}"), reason="malformed answer"
        ) from None
    return data, items


def _usage(data: dict[str, Any]) -> dict[str, Any]:
    usage = data.get("usage")
    return usage if isinstance(usage, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


class AnthropicModel(ChatModel):
    """``POST {base_url}/messages`` (Anthropic Messages API)."""

    api = "anthropic"

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system: list[str] = []
        turns: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]]) -> None:
            # consecutive turns of one role (tool results, then a nudge) become one turn
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})

        for m in messages:
            role = m.get("role")
            if role == "system":
                system.append(_text(m.get("content")))
            elif role == "tool":
                add("user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id") or "",
                              "content": _text(m.get("content"))}])  # fmt: skip
            elif role == "assistant":
                blocks: list[dict[str, Any]] = []
                if _text(m.get("content")):
                    blocks.append({"type": "text", "text": _text(m.get("content"))})
                for call in m.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
                                   "input": _arguments(fn.get("arguments"))})  # fmt: skip
                add("assistant", blocks or [{"type": "text", "text": ""}])
            else:
                add("user", [{"type": "text", "text": _text(m.get("content"))}])
        s = self.sampling
        body: dict[str, Any] = {
            **s.extra,
            "model": self.model,
            "max_tokens": s.max_tokens or ANTHROPIC_MAX_TOKENS,
            "messages": turns,
            **{k: v for k, v in (("temperature", s.temperature), ("top_p", s.top_p)) if v is not None},
        }
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [
                {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
                for f in _functions(tools)
            ]
        return self._from_anthropic(await self.post("/messages", body))

    def _from_anthropic(self, response: httpx.Response) -> dict[str, Any]:
        data, blocks = _listed(self, response, "content", "the Messages API")
        texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        calls = [
            {"id": b.get("id"), "type": "function",
             "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
            for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
        ]  # fmt: skip
        usage = _usage(data)
        return _chat_reply("".join(texts) or None, calls, _int(usage.get("input_tokens")),
                           _int(usage.get("output_tokens")))  # fmt: skip


class ResponsesModel(ChatModel):
    """``POST {base_url}/responses`` (OpenAI Responses API), stateless (``store: false``)."""

    api = "responses"

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for m in messages:
            role = m.get("role")
            if role == "tool":
                items.append({"type": "function_call_output", "call_id": m.get("tool_call_id") or "",
                              "output": _text(m.get("content"))})  # fmt: skip
                continue
            if role == "assistant":
                if _text(m.get("content")):
                    items.append({"role": "assistant", "content": _text(m.get("content"))})
                for call in m.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call.get("id") or "",
                            "name": fn.get("name"),
                            "arguments": fn.get("arguments") or "{}",
                        }
                    )
                continue
            items.append(
                {"role": "system" if role == "system" else "user", "content": _text(m.get("content"))}
            )
        s = self.sampling
        named = (("temperature", s.temperature), ("top_p", s.top_p), ("max_output_tokens", s.max_tokens))
        body: dict[str, Any] = {
            **s.extra,
            "model": self.model,
            "input": items,
            "store": False,
            **{k: v for k, v in named if v is not None},
        }
        if tools:
            body["tools"] = [{"type": "function", **f} for f in _functions(tools)]
        return self._from_responses(await self.post("/responses", body))

    def _from_responses(self, response: httpx.Response) -> dict[str, Any]:
        data, output = _listed(self, response, "output", "the Responses API")
        texts, calls = [], []
        for item in output:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                texts += [str(c.get("text", "")) for c in item.get("content") or []
                          if isinstance(c, dict) and c.get("type") == "output_text"]  # fmt: skip
            elif item.get("type") == "function_call":
                calls.append(
                    {
                        "id": item.get("call_id"),
                        "type": "function",
                        "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
                    }
                )
        usage = _usage(data)
        return _chat_reply("".join(texts) or None, calls, _int(usage.get("input_tokens")),
                           _int(usage.get("output_tokens")))  # fmt: skip


APIS: dict[str, type[ChatModel]] = {
    "chat": ChatModel,
    "anthropic": AnthropicModel,
    "responses": ResponsesModel,
}


def model_class(api: str) -> type[ChatModel]:
    """The model class of ``--api`` (``chat``, ``anthropic`` or ``responses``)."""
    if api not in APIS:
        close = did_you_mean(api, APIS)
        raise EnvbuilderError(
            f"--api {api!r}: expected one of {', '.join(APIS)}", hint=close, code="invalid_option"
        )
    return APIS[api]
