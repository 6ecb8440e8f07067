"""An OpenAI-compatible chat-completions endpoint: sampling parameters and the shared retry policy."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from envbuilder.errors import EnvbuilderError
from envbuilder.retry import RetryPolicy

__all__ = ["ChatModel", "ModelError", "Sampling"]

#: A chat completion has no side effects, so a 500 is retried too; a model endpoint under load
#: may need the longer waits.
DEFAULT_RETRY = RetryPolicy(max_retries=5, backoff=1.0, max_backoff=30.0, repeat_safe=True)


class ModelError(EnvbuilderError):
    """The model endpoint failed (after retries, for 429/5xx and dropped connections)."""

    code = "model_error"

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason
        """A short cause to count errors by, e.g. ``HTTP 429`` or ``unreachable (ConnectError)``."""


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every request (None: not sent, the endpoint's default)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """More request fields, e.g. ``{"reasoning_effort": "low"}``; the named ones win."""

    def fields(self) -> dict[str, Any]:
        """The request fields these parameters add."""
        named = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        return {**self.extra, **named}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ChatModel:
    """``POST {base_url}/chat/completions`` with ``model``, ``messages``, ``tools`` and sampling."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        sampling: Sampling | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.sampling = sampling or Sampling()
        self.retry = retry or DEFAULT_RETRY
        self._key = api_key or None
        headers = self._headers(api_key) if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self.retries = 0
        """Requests retried so far (for progress reports)."""
        self.tokens = {"prompt": 0, "completion": 0}
        """Tokens used so far by every request (what ``--max-cost`` counts)."""
        self.last_retry_reason: str | None = None

    #: The API's name for ``--api``.
    api = "chat"

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    async def aclose(self) -> None:
        await self._client.aclose()

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The endpoint's JSON answer in the chat-completions shape; raises ModelError when it fails
        for good. ``messages`` and ``tools`` are in the chat-completions format."""
        reply = await self._complete(messages, tools)
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        for name in self.tokens:
            value = usage.get(f"{name}_tokens")
            self.tokens[name] += value if isinstance(value, int) else 0
        return reply

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.sampling.fields(), "model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        return self._parse(await self._post("/chat/completions", body))

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``body`` with the retry policy; the successful response."""
        attempts = self.retry.attempts()
        while True:
            retry_after: str | None = None
            try:
                response = await self._client.post(path, json=body)
            except httpx.TransportError as exc:
                kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "unreachable"
                reason = f"{kind} ({type(exc).__name__})"
                failure = f"the model endpoint could not be reached ({type(exc).__name__})"
            else:
                if response.is_success:
                    return response
                reason = f"HTTP {response.status_code}"
                failure = f"the model endpoint answered HTTP {response.status_code}: {response.text[:300]}"
                if not self.retry.retryable(response.status_code):
                    raise ModelError(self._redact(failure), reason=reason)
                retry_after = response.headers.get("retry-after")
            if attempts.tries < self.retry.max_retries:  # about to wait for another try
                self.retries += 1
                self.last_retry_reason = reason
            if not await attempts.retry(failure, retry_after):
                raise ModelError(self._redact(attempts.gave_up()), reason=reason)

    def _parse(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError(
                self._redact(f"the model endpoint's answer has no choices[0].message: {response.text[:300]}"),
                reason="malformed answer",
            ) from None
        if not isinstance(message, dict):
            raise ModelError(
                "the model endpoint's choices[0].message is not an object", reason="malformed answer"
            )
        return dict(data)
