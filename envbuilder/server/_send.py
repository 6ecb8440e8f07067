"""A :class:`Reply` sent over ASGI, by both doors: its headers written once, its body whole or
streamed (events: ``_stream``; a long JSON body: :func:`stream_reply`). The fast door sends with
these functions; the FastAPI routes return a ``_responses.ReplyResponse``, which calls them. No
Starlette at import: the fast door answers before the FastAPI application is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envbuilder.server import _sse, _stream
from envbuilder.server._reply import SSE, Reply

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

Headers = list[tuple[bytes, bytes]]

_SSE_HEADERS: Headers = [(k.encode(), v.encode()) for k, v in _sse.HEADERS.items()]


def reply_headers(reply: Reply, extra: dict[str, str] | None = None) -> Headers:
    """Content type, length (unless streamed), the SSE headers for an event stream, then ``extra``."""
    headers: Headers = [(b"content-type", reply.media_type)]
    if reply.rest is None:
        headers.append((b"content-length", b"%d" % len(reply.body)))
    if reply.media_type == SSE:
        headers += _SSE_HEADERS
    if reply.headers:
        headers += [(k.lower().encode(), v.encode("latin-1")) for k, v in reply.headers.items()]
    if extra:
        headers += [(k.lower().encode(), v.encode("latin-1")) for k, v in extra.items()]
    return headers


async def send_reply(send: Send, reply: Reply, headers: Headers, interval: float | None = None) -> None:
    """Send ``reply`` over ASGI; a streamed one (``reply.rest``) pings every ``interval`` s."""
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    if reply.rest is None:
        await send({"type": "http.response.body", "body": reply.body})
        return
    assert interval is not None, "a streamed reply needs its keep-alive interval"
    async for chunk in _stream.events(reply, interval):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def stream_reply(scope: Scope, receive: Receive, send: Send, reply: Reply) -> None:
    """Send a reply whose body comes in chunks (``reply.chunks``) as Starlette streams one: it
    stops producing them when the client goes away."""
    from starlette.responses import StreamingResponse  # (imported once a reply streams)

    assert reply.chunks is not None
    response = StreamingResponse(reply.chunks, reply.status, media_type=reply.media_type.decode())
    await response(scope, receive, send)
