"""Routes are declared once, with FastAPI: the fast door answers some of those routes, by the
same methods and paths, and every route and method gets the same answer at both doors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import create_app
from envbuilder.server._fast import FastFront

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"]


def _fastapi_routes(app: Any) -> set[tuple[str, str]]:
    """What FastAPI serves, from its own OpenAPI document."""
    return {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}


def _fast_routes(app: Any) -> set[tuple[str, str]]:
    front = app.front
    return {(m, f"/{name}") for m, name in front.root} | {
        (m, f"/{{env_name}}/{name}") for m, name in front.env_routes
    }


def test_the_fast_door_answers_declared_routes_only(gsm8k: Environment) -> None:
    app = create_app([gsm8k])
    fast = _fast_routes(app)
    assert fast <= _fastapi_routes(app)
    assert fast == {
        ("GET", "/health"),
        ("POST", "/create_session"),
        ("POST", "/create"),
        ("POST", "/ping"),
        ("POST", "/delete"),
        ("POST", "/delete_session"),
        ("GET", "/{env_name}/prompt"),
        ("GET", "/{env_name}/messages"),
        ("GET", "/{env_name}/task_tools"),
        ("GET", "/{env_name}/tools"),
        ("GET", "/{env_name}/splits"),
        ("POST", "/{env_name}/call"),
        ("POST", "/{env_name}/num_tasks"),
        ("POST", "/{env_name}/task"),
        ("POST", "/{env_name}/task_range"),
    }


def test_a_fast_handler_without_its_route_is_refused(gsm8k: Environment) -> None:
    app = create_app([gsm8k])
    routes = [r for r in app.routes if getattr(r, "name", None) != "prompt"]
    with pytest.raises(RuntimeError, match="prompt"):
        FastFront(app.state.ors, app.fastapi_call, routes)


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
