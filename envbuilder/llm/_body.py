"""The pieces of a chat-completions request and reply shared by every caller: the body, the API
key rule and the reply's text."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["chat_body", "reply_text", "resolve_api_key"]


def chat_body(
    model: str,
    messages: list[dict[str, str]],
    temperature: float,
    max_tokens: int | None,
    extra_body: dict[str, Any],
) -> dict[str, Any]:
    """The body of an OpenAI-compatible ``/chat/completions`` request (the one shape of the
    judge and the simulated user): ``extra_body`` first, so the model, the messages and the
    sampling settings the spec names win over it."""
    body: dict[str, Any] = {**extra_body, "model": model, "messages": messages}
    body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def resolve_api_key(secret: str | None, env: str | None, secrets: dict[str, str]) -> str | None:
    """The API key of a model call: the session secret named ``secret``, else the server's
    environment variable ``env``, else None (the one rule of the judge and the simulated user)."""
    if secret and secrets.get(secret):
        return secrets[secret]
    if env and os.environ.get(env):
        return os.environ[env]
    return None


def reply_text(answer: dict[str, Any]) -> str | None:
    """The assistant message's text in a chat completion (content parts joined); None when the
    answer has no ``choices[0].message`` or its content is not text."""
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None
