"""bench/scripted_endpoint.py: its replies are whole chat completions, as OpenAI's SDK (and so
verifiers' `vf-eval`) parses them."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT


def _app() -> Any:
    path = ROOT / "bench" / "scripted_endpoint.py"
    spec = importlib.util.spec_from_file_location("scripted_endpoint", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app({"What is 2 + 2?": "4"}, right=1.0)


async def _ask(body: dict[str, Any]) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://scripted") as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    return dict(response.json())


TOOLS = [{"type": "function", "function": {"name": "submit", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize("tools", [TOOLS, None], ids=["tool-call", "text"])
async def test_a_reply_is_a_whole_chat_completion(tools: list[dict[str, Any]] | None) -> None:
    body: dict[str, Any] = {"model": "my-model", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
    if tools:
        body["tools"] = tools
    reply = await _ask(body)
    assert {"id", "object", "created", "model", "choices", "usage"} <= set(reply)
    assert reply["object"] == "chat.completion" and reply["model"] == "my-model"
    assert isinstance(reply["created"], int) and reply["id"].startswith("chatcmpl-")
    (choice,) = reply["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    if tools:
        assert choice["finish_reason"] == "tool_calls"
        assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"answer": "4"}
    else:
        assert (choice["finish_reason"], choice["message"]["content"]) == ("stop", "The answer is 4")
    assert reply["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    chat = pytest.importorskip("openai.types.chat")
    parsed = chat.ChatCompletion.model_validate(reply)  # what verifiers' client does with it
    assert parsed.model == "my-model" and parsed.choices[0].index == 0
