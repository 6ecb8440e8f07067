"""What a server does when it starts and stops, whichever application runs it (``create_app``'s
FastAPI application, or ``serve``'s, whose FastAPI part is built after it starts)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from typing import Any

from envbuilder.server._context import ServerContext


def server_lifespan(ctx: ServerContext) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """Start the reaper; on shutdown stop it, finish the calls in flight and close everything."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(ctx.settings.reap_interval)
                ctx.reap()

        # Everything built so far lives as long as the server: keep it out of the GC's scans.
        gc.collect()
        gc.freeze()
        task = asyncio.create_task(reaper())
        # Containers a crashed server of the same id left (in the background: an engine that is
        # down must not stop the server from starting).
        left = [asyncio.create_task(e.containers.reap_once()) for e in ctx.envs.values() if e.containers]
        if ctx.keeper is not None:  # warm containers, and a shared store's reaper
            await ctx.keeper.prepare()
            left.append(asyncio.create_task(ctx.keeper.run()))
        try:
            yield
        finally:
            task.cancel()
            for reap in left:
                reap.cancel()
            if ctx.keeper is not None:
                await ctx.keeper.aclose()
            await ctx.drain()
            for env in ctx.envs.values():
                await env.aclose()
            await ctx.sessions.aclose()

    return lifespan
