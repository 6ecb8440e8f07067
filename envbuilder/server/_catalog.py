"""``GET /catalog``: the catalog of the served environments as JSON (built once, on first request)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from envbuilder.server._responses import json_response

router = APIRouter()

#: Grader settings a client of the server has no business knowing: where the judge runs
#: (often an internal address) says more about the operator's network than about the task.
_PRIVATE_KEYS = frozenset({"base_url"})


def _without_endpoints(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_endpoints(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_endpoints(v) for k, v in value.items() if k not in _PRIVATE_KEYS}
    return value


@router.get("/catalog", tags=["discovery"])
async def catalog(request: Request) -> Response:
    """Every served environment: metadata, content hash, splits, tools, graders, a sample prompt."""
    from envbuilder.catalog import build_catalog

    cached: dict[str, Any] | None = getattr(request.app.state, "catalog", None)
    if cached is None:
        # Hashing data files reads them: keep the event loop free.
        built = await run_in_threadpool(build_catalog, list(request.app.state.ors.envs.values()))
        cached = request.app.state.catalog = _without_endpoints(built)
    return json_response(cached)
