"""Verdicts of a deterministic check, remembered and shared: a bounded LRU plus the checks in flight.

A GRPO trainer sends a prompt's samples together, and many of them end on the same final answer;
the ``math`` grader would start a fresh checker process for each (about a fork and a SymPy parse,
tens of milliseconds on a quiet core, seconds on a loaded one). A check's verdict depends only on
its inputs (the answer, the target and the grader's settings; nothing of the process it ran in
survives it), so the second sample with the same answer takes the first one's verdict, and a
sample that arrives while the same check runs waits for that run instead of starting another.

Only verdicts are kept: a check that timed out or whose process failed raises, and the next
sample with that answer checks again (the waiters of that run see the same exception, as they
would have on their own run). The table holds at most ``size`` entries and only keys up to
``max_key_chars`` characters, so its memory is bounded whatever the answers are; the futures are
per event loop (a test or a trainer's adapter may run several loops).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Verdicts"]

V = TypeVar("V")


class Verdicts(Generic[V]):
    """Remembered verdicts (the last ``size`` used) and the checks running now, by key."""

    def __init__(self, size: int = 4096, max_key_chars: int = 4096) -> None:
        self.size = size
        self.max_key_chars = max_key_chars
        self._done: OrderedDict[Hashable, V] = OrderedDict()
        self._running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, asyncio.Task[V]]]
        self._running = weakref.WeakKeyDictionary()
        self.hits = 0
        """Checks answered by a remembered verdict or by a run in flight."""
        self.runs = 0
        """Checks run."""

    def __len__(self) -> int:
        return len(self._done)

    async def check(self, key: tuple[str, ...], run: Callable[[], Awaitable[V]]) -> V:
        """The verdict for ``key``: remembered, shared with a run in flight, or ``await run()``.

        The run is a task of its own, so a caller that goes away (its client disconnected)
        does not cancel the check the others wait for."""
        if sum(map(len, key)) > self.max_key_chars:
            self.runs += 1
            return await run()
        done = self._done.get(key, _MISSING)
        if done is not _MISSING:
            with contextlib.suppress(KeyError):  # (dropped meanwhile by a loop in another thread)
                self._done.move_to_end(key)
            self.hits += 1
            return done  # type: ignore[return-value]
        loop = asyncio.get_running_loop()
        running = self._running.setdefault(loop, {})
        task = running.get(key)
        if task is None:
            self.runs += 1
            task = running[key] = loop.create_task(self._run(key, run, running))
            task.add_done_callback(_retrieve)
        else:
            self.hits += 1
        return await asyncio.shield(task)

    async def _run(
        self, key: tuple[str, ...], run: Callable[[], Awaitable[V]], running: dict[Hashable, asyncio.Task[V]]
    ) -> V:
        try:
            verdict = await run()
        finally:
            del running[key]
        self._done[key] = verdict
        while len(self._done) > self.size:
            with contextlib.suppress(KeyError):
                self._done.popitem(last=False)
        return verdict


def _retrieve(task: asyncio.Task[object]) -> None:
    """Mark a failed run's exception retrieved (every caller may have gone): no log line."""
    if not task.cancelled():
        task.exception()


_MISSING = object()
