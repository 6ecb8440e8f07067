"""Progress of a run as plain lines (for CI logs and files): done/total, rate, errors so far."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

__all__ = ["ProgressLines"]


class ProgressLines:
    """Counts finished episodes; ``line()`` says where the run is."""

    def __init__(
        self,
        total: int,
        *,
        retries: Callable[[], tuple[int, str | None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total = total
        self.done = 0
        self.errors = 0
        self._retries = retries
        """Requests retried so far and the last reason (a run that only retries is not idle)."""
        self._clock = clock
        self._started = clock()

    def record(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.errors += record.get("status") == "error"

    def line(self) -> str:
        elapsed = max(self._clock() - self._started, 1e-9)
        errors = "1 error" if self.errors == 1 else f"{self.errors} errors"
        text = (
            f"envbuilder: {self.done}/{self.total} episodes, {self.done / elapsed:.2f}/s, "
            f"{errors}, {elapsed:.0f} s"
        )
        retried, reason = self._retries() if self._retries is not None else (0, None)
        if retried:
            text += f"; {retried} request(s) retried, the last after {reason}"
        return text

    @contextlib.asynccontextmanager
    async def every(self, seconds: float, write: Callable[[str], None]) -> AsyncIterator[None]:
        """Write a line every ``seconds`` while the block runs, and a last one at its end."""

        async def tick() -> None:
            while True:
                await asyncio.sleep(seconds)
                write(self.line())

        task = asyncio.create_task(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            write(self.line())
