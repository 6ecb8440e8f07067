"""``GET /catalog``: the catalog of the served environments as JSON (built once, on first request)."""

from __future__ import annotations

import asyncio
from typing import Any

from envbuilder.server._context import ServerContext
from envbuilder.server._reply import Reply, json_reply

#: Grader settings a client of the server has no business knowing: where the judge runs
#: (often an internal address) says more about the operator's network than about the task.
_PRIVATE_KEYS = frozenset({"base_url"})


def _without_endpoints(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_endpoints(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_endpoints(v) for k, v in value.items() if k not in _PRIVATE_KEYS}
    return value


async def catalog(ctx: ServerContext) -> Reply:
    """Every served environment: metadata, content hash, splits, tools, graders, a sample prompt."""
    if ctx.catalog is None:
        from envbuilder.catalog import build_catalog

        # Hashing data files reads them: keep the event loop free.
        built = await asyncio.to_thread(build_catalog, list(ctx.envs.values()))
        ctx.catalog = json_reply(_without_endpoints(built))
    return ctx.catalog
