"""A :class:`Reply` as a Starlette response, for the FastAPI routes and handlers: a
:class:`ReplyResponse` sends exactly as the fast door does (``_send``)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from envbuilder.server._reply import Reply, json_reply
from envbuilder.server._send import reply_headers, send_reply, stream_reply


class ReplyResponse(Response):
    """A Starlette response that sends a :class:`Reply` exactly as the fast door does."""

    def __init__(self, reply: Reply, extra: dict[str, str] | None = None, *, interval: float | None = None):
        self.reply = reply
        self.interval = interval
        self.status_code = reply.status
        self.body = reply.body
        self.background = None
        self.raw_headers = reply_headers(reply, extra)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.reply.chunks is not None:
            await stream_reply(scope, receive, send, self.reply)
        else:
            await send_reply(send, self.reply, self.raw_headers, self.interval)
        if self.background is not None:
            await self.background()


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``content`` as compact JSON (see :func:`json_reply`)."""
    return ReplyResponse(json_reply(content, status), headers)
