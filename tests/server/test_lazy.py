"""`serve`'s application (``serving_app``): the lean door answers before FastAPI is built, and a
request that needs FastAPI waits for it, then gets exactly what ``create_app``'s answers."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app, serving_app
from envbuilder.server._context import ServerContext
from envbuilder.server._lazy import LazyApp
from tests.server.test_fast import SCRIPT
from tests.servers import serve_app

J = {"content-type": "application/json"}

# What only FastAPI answers: its documents, its 422s, its 404 and 405, a form body.
FASTAPI_ONLY: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("GET", "/openapi.json", {}, None),
    ("GET", "/docs", {}, None),
    ("GET", "/redoc", {}, None),
    ("GET", "/docs/oauth2-redirect", {}, None),
    ("POST", "/gsm8k/num_tasks", J, b'{"split":"train","x":1}'),
    ("POST", "/gsm8k/task", J, b"not json"),
    ("POST", "/gsm8k/task", {"content-type": "application/x-www-form-urlencoded"}, b"split=test"),
    ("GET", "/gsm8k/nosuch", {}, None),
    ("PUT", "/health", {}, None),
    ("GET", "/nosuch/route/deeper", {}, None),
]

_IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


def _seen(r: httpx.Response) -> tuple[int, bytes, str | None, str | None, str | None]:
    return (
        r.status_code,
        _IDS.sub(b"<id>", r.content),
        r.headers.get("content-type"),
        r.headers.get("location"),
        r.headers.get("allow"),
    )


async def _one(client: httpx.AsyncClient, request: tuple[str, str, dict[str, str], Any]) -> Any:
    method, path, headers, body = request
    return _seen(await client.request(method, path, headers=headers, content=body))


def test_the_lean_door_knows_the_fastapi_routes_without_fastapi(gsm8k: Environment) -> None:
    """The first path segments the lean door keeps for FastAPI (never an environment's name)
    are those of the built application."""
    lazy = LazyApp(ServerContext([gsm8k], ServerSettings()))
    assert lazy.front.roots == create_app([gsm8k]).front.roots


@pytest.mark.asyncio
async def test_requests_before_the_build_wait_for_it_and_get_create_apps_answers(gsm8k: Environment) -> None:
    lazy = serving_app([gsm8k])
    assert isinstance(lazy, LazyApp) and not lazy.built.done()
    eager = create_app([gsm8k])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=lazy), base_url="http://t") as client:
        # The lean door answers while nothing of FastAPI is built.
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert (await client.post("/gsm8k/num_tasks", json={"split": "test"})).json() == {"num_tasks": 1319}
        assert not lazy.built.done()
        # All at once, none built yet: the first starts the build, every one waits for it.
        early = await asyncio.gather(*(_one(client, r) for r in FASTAPI_ONLY))
        assert lazy.built.done()
        scripted = [await _one(client, r) for r in SCRIPT]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=eager), base_url="http://t") as client:
        expected = [await _one(client, r) for r in FASTAPI_ONLY]
        expected_script = [await _one(client, r) for r in SCRIPT]
    for request, got, want in zip(FASTAPI_ONLY, early, expected, strict=True):
        assert got == want, request[:2]
        assert got[0] not in (500, 503), request[:2]
    for request, got, want in zip(SCRIPT, scripted, expected_script, strict=True):
        assert got == want, request[:2]
    assert lazy.front.served > 0


def test_under_uvicorn_the_build_starts_with_the_server(gsm8k: Environment) -> None:
    """A real uvicorn runs the lifespan, which starts the build; the OpenAPI document is
    create_app's, with the served names."""
    lazy = serving_app([gsm8k], ServerSettings())
    with serve_app(lazy) as url:
        assert httpx.get(url + "/health").json() == {"status": "ok"}
        lazy.built.result(timeout=120)  # started by the lifespan, not by a request
        document = httpx.get(url + "/openapi.json").json()
        task = {"split": "test", "index": 0}
        created = httpx.post(url + "/create", headers={"X-Session-ID": "s1"}, json=task)
        assert created.status_code == 200 and len(lazy.ctx.sessions) == 1
    assert document == create_app([gsm8k]).openapi()


def test_a_server_with_a_door_builds_fastapi_first(gsm8k: Environment) -> None:
    app = serving_app([gsm8k], ServerSettings(doors=("openenv",)))
    assert not isinstance(app, LazyApp)
    assert "openenv" in app.front.roots


@pytest.mark.asyncio
async def test_a_forced_exit_ends_the_lifespan_quietly(gsm8k: Environment) -> None:
    """A second Ctrl-C skips the shutdown message and cancels the lifespan: the server stops
    without reporting a failed shutdown (uvicorn would log it as a traceback); its lifespan state
    holds what the connections' shutdown calls."""
    app = LazyApp(ServerContext([gsm8k], ServerSettings()))
    sent: list[dict[str, Any]] = []
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await messages.put({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "lifespan", "state": {}}
    task = asyncio.create_task(app(scope, messages.get, send))
    while not sent:
        await asyncio.sleep(0.01)
    assert sent == [{"type": "lifespan.startup.complete"}]
    assert scope["state"] == {"envbuilder.stop": app.ctx.calls.stop}
    task.cancel()
    await asyncio.wait({task})
    assert not task.cancelled() and task.exception() is None
    assert sent == [{"type": "lifespan.startup.complete"}]
    assert app.ctx.calls.stopped
