"""A :class:`_ops.Reply` sent as an HTTP response."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from envbuilder.server import _ops


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``content`` as compact JSON (see :func:`_ops.json_reply`)."""
    reply = _ops.json_reply(content, status)
    return Response(reply.body, status_code=status, media_type="application/json", headers=headers)
