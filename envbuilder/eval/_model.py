"""An OpenAI-compatible chat-completions endpoint, with bounded retries that honour Retry-After."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from envbuilder.errors import EnvbuilderError
from envbuilder.retry_after import parse_retry_after

__all__ = ["ChatModel", "ModelError"]

_RETRY = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ModelError(EnvbuilderError):
    """The model endpoint failed (after retries, for 429/5xx and dropped connections)."""

    code = "model_error"


class ChatModel:
    """``POST {base_url}/chat/completions`` with ``model``, ``messages`` and ``tools``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        timeout: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.model = model
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._key = api_key or None
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self.retries = 0

    async def aclose(self) -> None:
        await self._client.aclose()

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The endpoint's JSON answer; raises ModelError when it fails for good."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        attempt = 0
        while True:
            retry_after: str | None = None
            try:
                response = await self._client.post("/chat/completions", json=body)
            except httpx.TransportError as exc:
                failure = f"the model endpoint could not be reached ({type(exc).__name__})"
            else:
                if response.is_success:
                    return self._parse(response)
                failure = f"the model endpoint answered HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in _RETRY:
                    raise ModelError(self._redact(failure))
                retry_after = response.headers.get("retry-after")
            attempt += 1
            if attempt > self.max_retries:
                raise ModelError(self._redact(f"{failure} (gave up after {attempt} tries)"))
            self.retries += 1
            hinted = parse_retry_after(retry_after)
            delay = hinted if hinted is not None else self.backoff * 2 ** (attempt - 1)
            await asyncio.sleep(min(delay, self.max_backoff))

    def _parse(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError(
                self._redact(f"the model endpoint's answer has no choices[0].message: {response.text[:300]}")
            ) from None
        if not isinstance(message, dict):
            raise ModelError("the model endpoint's choices[0].message is not an object")
        return dict(data)
