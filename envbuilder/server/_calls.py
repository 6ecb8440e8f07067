"""Tool calls by ``task_id``: running ones can be re-attached to, finished ones replayed for 60 s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

LINGER_SECONDS = 60.0


class CallRegistry:
    """Process-wide, like the reference servers: any live session may replay a task_id."""

    def __init__(self, linger: float = LINGER_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.linger = linger
        self._clock = clock  # tests pass a fake one: the linger must not depend on a loaded machine
        self._running: dict[str, asyncio.Future[bytes]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}

    def finished(self, task_id: str, frames: bytes) -> None:
        """Record the SSE frames (after the ``task_id`` event) of a finished call."""
        self._running.pop(task_id, None)
        self._done.pop(task_id, None)  # keep completion order: a replaced entry moves to the end
        self._done[task_id] = (frames, self._clock())

    def start(self, task_id: str, work: Awaitable[bytes]) -> asyncio.Future[bytes]:
        """Run ``work`` (which yields the result frames) detached from the request."""
        fut = asyncio.ensure_future(work)
        self._running[task_id] = fut

        def _done(f: asyncio.Future[bytes]) -> None:
            if not f.cancelled() and f.exception() is None:
                self.finished(task_id, f.result())
            else:
                self._running.pop(task_id, None)

        fut.add_done_callback(_done)
        return fut

    def lookup(self, task_id: str) -> bytes | asyncio.Future[bytes] | None:
        done = self._done.get(task_id)
        if done is not None and self._clock() - done[1] <= self.linger:
            return done[0]
        return self._running.get(task_id)

    def evict(self) -> None:
        """Forget results older than the linger. ``_done`` is in completion order (insertion
        order of a dict), so this stops at the first result still young enough."""
        cutoff = self._clock() - self.linger
        expired = []
        for task_id, (_, at) in self._done.items():
            if at >= cutoff:
                break
            expired.append(task_id)
        for task_id in expired:
            del self._done[task_id]
