"""A plain round-robin HTTP load balancer for tests: every request goes to the next upstream
(no stickiness), the way a load balancer in front of replicas may spread one session."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"host"}


class RoundRobin:
    """ASGI app forwarding each request to the next of ``upstreams`` (base URLs)."""

    def __init__(self, upstreams: list[str]):
        self.upstreams = upstreams
        self._next = itertools.cycle(range(len(upstreams)))
        self.sent = [0] * len(upstreams)
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._client = httpx.AsyncClient(timeout=60)
                    await send({"type": "lifespan.startup.complete"})
                else:
                    assert self._client is not None
                    await self._client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        i = next(self._next)
        self.sent[i] += 1
        url = self.upstreams[i] + scope["path"]
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        assert self._client is not None
        reply = await self._client.request(scope["method"], url, headers=headers, content=body)
        out = [(k, v) for k, v in reply.headers.raw if k.lower() not in HOP_BY_HOP]
        await send({"type": "http.response.start", "status": reply.status_code, "headers": out})
        await send({"type": "http.response.body", "body": reply.content})
