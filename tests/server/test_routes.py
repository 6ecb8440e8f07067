"""Routes are declared once, in the route table (``_routes.ROUTES``): both doors are built from it,
the fast door answers exactly those routes by the same methods and paths, FastAPI serves and
documents each of them, and every route and method gets the same answer at both doors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import create_app
from envbuilder.server._routes import ROUTES

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"]


def _fastapi_routes(app: Any) -> set[tuple[str, str]]:
    """What FastAPI serves, from its own OpenAPI document."""
    return {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}


def _fast_routes(app: Any) -> set[tuple[str, str]]:
    front = app.front
    return {(m, f"/{name}") for m, name in front.root} | {
        (m, f"/{{env_name}}/{name}") for m, name in front.env_routes
    }


def test_both_doors_serve_the_table(gsm8k: Environment) -> None:
    app = create_app([gsm8k])
    table = {(r.method, r.path) for r in ROUTES}
    assert _fast_routes(app) == table
    assert _fastapi_routes(app) == table
    assert {("GET", "/health"), ("POST", "/create"), ("POST", "/{env_name}/call")} <= table
    assert len(table) == len(ROUTES) == 20  # one row per route


def test_the_table_names_each_route_once() -> None:
    names = [r.name for r in ROUTES]
    assert len(set(names)) == len(names)
    assert all(r.handler.__doc__ for r in ROUTES)  # each route's description in the OpenAPI document


@pytest.mark.asyncio
async def test_every_route_and_method_answers_alike_at_both_doors(gsm8k: Environment) -> None:
    fast, plain = create_app([gsm8k]), create_app([gsm8k])
    plain.front.fast = False  # the same shared checks, then always FastAPI
    declared = [*(p for _, p in _fastapi_routes(fast)), "/docs", "/redoc", "/openapi.json", "/nosuch"]
    paths = sorted({p.replace("{env_name}", "gsm8k") for p in declared})
    headers = {"content-type": "application/json", "x-session-id": "s1"}
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://t") for a in (fast, plain)
    ]
    try:
        for path in paths:
            for method in METHODS:
                a, b = [await c.request(method, path, headers=headers, content=b"{}") for c in clients]
                assert (a.status_code, a.headers.get("content-type"), a.headers.get("allow")) == (
                    b.status_code,
                    b.headers.get("content-type"),
                    b.headers.get("allow"),
                ), (method, path, a.text, b.text)
    finally:
        for c in clients:
            await c.aclose()
    assert fast.front.served > 0 and plain.front.served == 0
