"""Tool calls by ``task_id``: running ones can be re-attached to, finished ones replayed for 60 s.

The running calls are always this process's own; the finished ones are kept here for the
in-process session store (a shared store keeps them itself, see ``_redis``). A call is named by
``_sessions.call_key`` (its session's key and its task id), so only the session that made it
can re-attach to it.

When the server stops, :meth:`CallRegistry.stop` cancels the running calls: a call is never
left to finish against clients the shutdown is closing (a judge's connection closed under it
would read as a failed grade), and a cancelled call saves nothing, so it is void: its stream ends
with an ``error`` event (``_tool_calls.final_frames``), and with a shared store another worker
takes it over when its client re-attaches by ``task_id``."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

from envbuilder.errors import RequestRejected

LINGER_SECONDS = 60.0


class CallRegistry:
    """The process's calls, by :func:`envbuilder.server._sessions.call_key`."""

    def __init__(self, linger: float = LINGER_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.linger = linger
        self._clock = clock  # tests pass a fake one: the linger must not depend on a loaded machine
        self._running: dict[str, asyncio.Future[bytes]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}
        self.stopped = False
        """The server is stopping: running calls were cancelled, no new one starts."""

    def finished(self, call: str, frames: bytes) -> None:
        """Record the SSE frames (after the ``task_id`` event) of a finished call."""
        self._running.pop(call, None)
        self._done.pop(call, None)  # keep completion order: a replaced entry moves to the end
        self._done[call] = (frames, self._clock())

    def start(self, call: str, work: Awaitable[bytes]) -> asyncio.Future[bytes]:
        """Run ``work`` (which yields the result frames and records them in the session
        store) detached from the request. Refused (503) once the server is stopping."""
        if self.stopped:
            if inspect.iscoroutine(work):
                work.close()
            raise RequestRejected(503, SHUTTING_DOWN, headers={"Retry-After": "1"})
        fut = asyncio.ensure_future(work)
        self._running[call] = fut
        fut.add_done_callback(lambda _: self._running.pop(call, None))
        return fut

    def stop(self) -> list[asyncio.Future[bytes]]:
        """Cancel the running calls (the server stops) and refuse new ones; the cancelled calls,
        for a caller that waits for them to end."""
        self.stopped = True
        running = list(self._running.values())
        for fut in running:
            fut.cancel()
        return running

    def running(self, call: str) -> asyncio.Future[bytes] | None:
        return self._running.get(call)

    def replay(self, call: str) -> bytes | None:
        """The frames of a call finished within the linger."""
        done = self._done.get(call)
        if done is not None and self._clock() - done[1] <= self.linger:
            return done[0]
        return None

    def lookup(self, call: str) -> bytes | asyncio.Future[bytes] | None:
        return self.replay(call) or self._running.get(call)

    def evict(self) -> None:
        """Forget results older than the linger. ``_done`` is in completion order (insertion
        order of a dict), so this stops at the first result still young enough."""
        cutoff = self._clock() - self.linger
        expired = []
        for call, (_, at) in self._done.items():
            if at >= cutoff:
                break
            expired.append(call)
        for call in expired:
            del self._done[call]


SHUTTING_DOWN = (
    "the server is shutting down; the call was stopped unfinished and not graded: call the tool again"
)
"""What a call the shutdown stopped (or would not start) answers; the same call on another
server, or on this one once it is back, is graded as if this one never ran."""
