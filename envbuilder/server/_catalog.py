"""``GET /catalog``: the catalog of the served environments as JSON (built once, on first request)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from envbuilder.server._app import json_response

router = APIRouter()


@router.get("/catalog", tags=["discovery"])
async def catalog(request: Request) -> Response:
    """Every served environment: metadata, content hash, splits, tools, graders, a sample prompt."""
    from envbuilder.catalog import build_catalog

    cached: dict[str, Any] | None = getattr(request.app.state, "catalog", None)
    if cached is None:
        # Hashing data files reads them: keep the event loop free.
        cached = await run_in_threadpool(build_catalog, list(request.app.state.ors.envs.values()))
        request.app.state.catalog = cached
    return json_response(cached)
