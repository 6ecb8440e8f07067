"""SSE streaming of a reply whose end is still running, for both doors: its first frames, a
keep-alive ping every ``interval`` seconds while it runs, then its last frames."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from envbuilder.server import _sse
from envbuilder.server._reply import Reply
from envbuilder.server._tool_calls import final_frames


async def events(reply: Reply, interval: float) -> AsyncIterator[bytes]:
    """The body of a streamed reply (``reply.rest`` set), piece by piece."""
    rest = reply.rest
    assert rest is not None, "only a streamed reply has events to stream"
    yield reply.body
    while True:
        done, _ = await asyncio.wait({rest}, timeout=interval)
        if done:
            break
        yield _sse.ping()
    yield final_frames(rest)
