"""What a route answers: :class:`Reply`, a complete response of pre-encoded bytes, and the
replies every route shares (JSON, the one error shape, the one answer to an unexpected error).

Both doors send a :class:`Reply` the same way (``_responses``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from envbuilder.server import _sse

log = logging.getLogger("envbuilder.server")

JSON = b"application/json"
SSE = _sse.MEDIA_TYPE.encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete response: status, body and its media type."""

    body: bytes
    media_type: bytes = JSON
    status: int = 200
    rest: asyncio.Future[bytes] | None = None
    """A streamed event reply: ``body`` is sent at once, the rest when this future is done."""
    headers: dict[str, str] | None = None
    """Headers besides the content type (``Retry-After``)."""
    chunks: AsyncIterator[bytes] | None = None
    """A streamed body (a whole split's tasks): ``body`` is empty, the chunks are sent as they come."""


HEALTH = Reply(b'{"status":"ok"}')
OK = HEALTH


def json_reply(content: Any, status: int = 200) -> Reply:
    """Compact JSON (pydantic models through their own serialiser, the rest through orjson)."""
    if hasattr(content, "model_dump_json"):
        return Reply(content.model_dump_json().encode(), JSON, status)
    return Reply(orjson.dumps(content), JSON, status)


def models_reply(items: list[Any]) -> Reply:
    return Reply(b"[" + b",".join(m.model_dump_json().encode() for m in items) + b"]")


def error_reply(status: int, detail: str) -> Reply:
    """The one error shape, ``{"detail": ...}``."""
    return Reply(orjson.dumps({"detail": detail}), JSON, status)


def internal_error(exc: BaseException, method: str, path: str) -> Reply:
    """The one answer to an unexpected error, for both doors. Never the message (it may hold a
    secret): the log has the type and the route. Sent with ``Connection: close`` (see
    :data:`CLOSE`) so a client's next request starts on a fresh connection."""
    log.error("unhandled %s on %s %s", type(exc).__name__, method, path[:200])
    return Reply(orjson.dumps({"detail": f"Internal Server Error ({type(exc).__name__})"}), JSON, 500)


CLOSE = {"connection": "close"}
"""Headers of an answer after which the connection is closed (500, 413)."""
