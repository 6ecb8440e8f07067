"""What a server does when it starts and stops, whichever application runs it (``create_app``'s
FastAPI application, or ``serve``'s, whose FastAPI part is built after it starts)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from typing import Any

from envbuilder.server._context import ServerContext

GC_THRESHOLDS = (700, 10, 1000)
"""The collector's thresholds while a server runs: CPython's young ones (700, 10), and a full
collection after 1,000 middle ones instead of 10.

Every open session's objects live until the session ends, so a full collection, which scans all
of them with the event loop stopped, grows with the sessions held: measured with
``bench/server_probe.py`` on a loaded machine, 67-186 ms at 10,000 open sessions and 128-649 ms at
30,000, and CPython's defaults allow one every ~85,000 objects kept (eight in the minute that
opened 20,000 sessions), each a stall every request in flight waits behind. With these, one
comes at most every ~7.7 million objects kept; CPython's own rule still holds it back until a
quarter of the old objects are new. The young collections are unchanged (their pauses do not
grow with the sessions: a larger first threshold made each one 10-160 ms), so garbage cycles
that die young are freed as before; cycles that die old wait longer for a full collection."""


STOP = "envbuilder.stop"
"""The lifespan state's key of the function that stops the calls in flight (``ctx.calls.stop``).

uvicorn sends the lifespan's shutdown only once every response has ended, so a tool call's
event stream, open until its call ends, would hold the shutdown for the whole graceful timeout
and then be cut without an ``end`` or ``error``. Its first step, though, is to call each
connection's ``shutdown()``; the server's protocol (``_limits.GuardedProtocol``) calls this
function from there, which ends every call stream at once with an ``error`` event."""


def server_lifespan(
    ctx: ServerContext,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[dict[str, Any]]]:
    """Start the reaper; on shutdown stop it, stop the calls in flight and close everything.
    Its state (:data:`STOP`) is what the connections' shutdown calls."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[dict[str, Any]]:
        # Everything built so far lives as long as the server: keep it out of the GC's scans.
        gc.collect()
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            async with _served(ctx):
                yield {STOP: ctx.calls.stop}
        finally:
            gc.set_threshold(*thresholds)

    return lifespan


@contextlib.asynccontextmanager
async def _served(ctx: ServerContext) -> AsyncIterator[None]:
    """The reaper and the keepers while the server runs; then the calls drained and all closed."""

    async def reaper() -> None:
        while True:
            await asyncio.sleep(ctx.settings.reap_interval)
            ctx.reap()

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
        # Calls whose client is gone still run detached: stopped before the clients they use
        # are closed below, which they would take for a failed grade and save.
        await asyncio.gather(*ctx.calls.stop(), return_exceptions=True)
        if ctx.keeper is not None:
            await ctx.keeper.aclose()
        await ctx.drain()
        for env in ctx.envs.values():
            await env.aclose()
        await ctx.sessions.aclose()
