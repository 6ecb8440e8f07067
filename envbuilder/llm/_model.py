"""An OpenAI-compatible chat-completions endpoint: the one HTTP loop of every model call.

:class:`ChatModel` owns the request loop (the shared retry policy of :mod:`envbuilder.retry`,
the error it raises when it gives up, the usage it counts); the judge, the simulated user and
the eval agent all send through it, and the other wire formats (:mod:`._apis`) subclass it.
httpx is imported when a model is first built, never by importing this module: a spec that
calls no model does not pay for it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from envbuilder.errors import EnvbuilderError
from envbuilder.retry import RetryPolicy

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["DEFAULT_RETRY", "DEFAULT_TIMEOUT", "ChatModel", "Describe", "ModelError", "Sampling", "Usage"]

log = logging.getLogger("envbuilder.llm")

#: A chat completion has no side effects, so a 500 is retried too; a model endpoint under load
#: may need the longer waits. A timeout is retried once: one can be a passing stall (a replica
#: restarting, a burst ahead in its queue), two in a row mean a hung endpoint or a request that
#: needs more time than allowed, and every further try would cost the whole timeout again.
DEFAULT_RETRY = RetryPolicy(
    max_retries=5, backoff=1.0, max_backoff=30.0, repeat_safe=True, max_timeout_retries=1
)

#: Seconds a model request may wait for the endpoint (to connect, to send, for the answer's
#: next bytes): long enough for a reasoning model's long answer, which comes all at once.
DEFAULT_TIMEOUT = 300.0

#: How a caller words one failed try: ``(reason, response or None)`` → the text kept as the
#: try's failure (``reason`` is the short cause, e.g. ``HTTP 503`` or ``timeout (ReadTimeout)``).
Describe = Callable[[str, "httpx.Response | None"], str]


class ModelError(EnvbuilderError):
    """The model endpoint failed (after retries, for 429/5xx and dropped connections)."""

    code = "model_error"

    def __init__(self, message: str, *, reason: str, gave_up: bool = False):
        super().__init__(message)
        self.reason = reason
        """A short cause to count errors by, e.g. ``HTTP 429`` or ``unreachable (ConnectError)``."""
        self.gave_up = gave_up
        """The failure was retryable and the retries ran out (False: refused outright, or a reply
        that is not the API's shape)."""


@dataclass
class Usage:
    """What the calls of one model (or of several sharing this object) used so far."""

    calls: int = 0
    """HTTP requests sent, retries included."""
    retries: int = 0
    """Requests retried."""
    last_retry_reason: str | None = None
    prompt_tokens: int = 0
    """Tokens as the endpoint reported them (what ``--max-cost`` counts)."""
    completion_tokens: int = 0


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


@functools.cache
def _tls_context(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The TLS context of every client, made once per setting: httpx makes a new one for each
    client by default, which loads the CA bundle (a third of a second of CPU on a busy machine),
    and the simulated user makes a client per turn. ``cert_file`` and ``cert_dir`` are the
    ``SSL_CERT_*`` variables httpx reads (part of the key, so a change takes effect)."""
    import httpx

    return httpx.create_ssl_context(trust_env=trust_env)


def _endpoint_failure(reason: str, response: httpx.Response | None, *, timeout: float | None = None) -> str:
    if response is None:
        cause = reason[reason.index("(") + 1 : -1]
        if reason.startswith("timeout") and timeout is not None:
            return f"the model endpoint gave no answer within {timeout:g} s ({cause})"
        return f"the model endpoint could not be reached ({cause})"
    return f"the model endpoint answered HTTP {response.status_code}: {response.text[:300]}"


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
        timeout: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
        trust_env: bool = True,
        usage: Usage | None = None,
    ):
        import httpx  # here, not at import: see the module docstring

        self.model = model
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        """Seconds each request may wait on the endpoint (None given: :data:`DEFAULT_TIMEOUT`)."""
        self.base_url = base_url.rstrip("/")
        self.sampling = sampling or Sampling()
        self.retry = retry or DEFAULT_RETRY
        self._key = api_key or None
        headers = self._headers(api_key) if api_key else {}
        from envbuilder.httppool import PoolTransport

        # A cap on connections when asked for (the judge's concurrency), else 100, in a pool
        # whose cost per request does not grow with the requests waiting (``eval`` puts
        # thousands in flight against a slow endpoint; httpx's own pool costs their square).
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            # on the wire only: the wait for one of the connections is the caller's own queue
            timeout=httpx.Timeout(self.timeout, pool=None),
            transport=transport
            or PoolTransport(
                max_connections=max_connections or 100,
                keepalive_expiry=5.0,
                # one TLS context per setting for every model client, made on the first https
                # connection (the simulated user makes a client per turn)
                verify=functools.partial(
                    _tls_context, trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
                ),
            ),
            trust_env=trust_env,
        )
        self.usage = usage if usage is not None else Usage()
        """Calls, retries and tokens so far (for progress reports and ``--max-cost``)."""

    #: The API's name for ``--api``.
    api = "chat"

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    async def aclose(self) -> None:
        await self._client.aclose()

    def _redact(self, text: str, key: str | None = None) -> str:
        for secret in (self._key, key):
            if secret:
                text = text.replace(secret, "***")
        return text

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The endpoint's JSON answer in the chat-completions shape; raises ModelError when it fails
        for good. ``messages`` and ``tools`` are in the chat-completions format."""
        reply = await self._complete(messages, tools)
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        for name in ("prompt", "completion"):
            value = usage.get(f"{name}_tokens")
            if isinstance(value, int):
                setattr(self.usage, f"{name}_tokens", getattr(self.usage, f"{name}_tokens") + value)
        return reply

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.sampling.fields(), "model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        return self._parse(await self.post("/chat/completions", body))

    async def post(
        self, path: str, body: dict[str, Any], *, api_key: str | None = None, describe: Describe | None = None
    ) -> httpx.Response:
        """POST ``body`` to ``path`` under the retry policy; the successful response.

        ``api_key`` is this request's key (instead of the model's); ``describe`` words each
        failed try (default: the endpoint's status and the start of its answer).

        Raises:
            ModelError: a status that is not retried, or the retries ran out (``gave_up``).
        """
        import httpx

        describe = describe or functools.partial(_endpoint_failure, timeout=self.timeout)
        headers = self._headers(api_key) if api_key else None
        attempts = self.retry.attempts()
        while True:
            self.usage.calls += 1
            retry_after: str | None = None
            response: httpx.Response | None = None
            timed_out = False
            try:
                response = await self._client.post(path, json=body, headers=headers)
            except httpx.UnsupportedProtocol as exc:  # no http(s) scheme or no host: no try helps
                raise ModelError(
                    f"the model endpoint's URL is not an http(s) URL with a host: {exc}", reason="invalid URL"
                ) from None
            except httpx.TransportError as exc:
                timed_out = isinstance(exc, httpx.TimeoutException)
                reason = f"{'timeout' if timed_out else 'unreachable'} ({type(exc).__name__})"
            else:
                if response.is_success:
                    return response
                reason = f"HTTP {response.status_code}"
                if not self.retry.retryable(response.status_code):
                    raise ModelError(self._redact(describe(reason, response), api_key), reason=reason)
                retry_after = response.headers.get("retry-after")
            log.debug("model %s: %s (try %d)", self.model, reason, attempts.tries + 1)
            if attempts.allows(timeout=timed_out):  # about to wait for another try
                self.usage.retries += 1
                self.usage.last_retry_reason = reason
            if not await attempts.retry(describe(reason, response), retry_after, timeout=timed_out):
                raise ModelError(self._redact(attempts.gave_up(), api_key), reason=reason, gave_up=True)

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
