"""A probe of the event loop for tests: how often it got to run while a block awaited."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def ticking(interval: float = 0.01) -> AsyncIterator[list[int]]:
    """Count the loop's turns (one per ``interval``) while the block runs, in ``ticks[0]``: a loop
    held by a long call in its own thread counts few."""
    ticks = [0]

    async def tick() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(interval)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        yield ticks
    finally:
        ticker.cancel()
