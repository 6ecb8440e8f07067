"""The lean front door answers every request exactly as the FastAPI routes do."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import create_app

J = {"content-type": "application/json"}
S = {"X-Session-ID": "s1"}
SJ = {**S, **J}

# A scripted conversation covering the fast routes, their error paths, and the fallbacks.
SCRIPT: list[tuple[str, str, dict[str, str], Any]] = [
    ("GET", "/health", {}, None),
    ("GET", "/list_environments", {}, None),
    ("GET", "/gsm8k/tools", {}, None),
    ("GET", "/GSM8K/splits", {}, None),
    ("GET", "/health/tools", {}, None),
    ("GET", "/tools?x=1", {}, None),
    ("POST", "/gsm8k/num_tasks", J, b'{"split":"train"}'),
    ("POST", "/gsm8k/num_tasks", J, b'{"split":"nope"}'),
    ("POST", "/gsm8k/num_tasks", J, b'{"split":"train","x":1}'),
    ("POST", "/gsm8k/num_tasks", {}, b'{"split":"train"}'),
    ("POST", "/gsm8k/task", J, b'{"split":"test","index":-1}'),
    ("POST", "/gsm8k/task", J, b'{"split":"test","index":"2"}'),
    ("POST", "/gsm8k/task", J, b'{"split":"test","index":1.5}'),
    ("POST", "/gsm8k/task", J, b'{"split":"test","index":99999}'),
    ("POST", "/gsm8k/task", J, b"not json"),
    ("POST", "/gsm8k/task_range", J, b'{"split":"test","start":-2}'),
    ("POST", "/create", J, b'{"split":"train","index":0}'),
    ("POST", "/create", SJ, b'{"split":"train"}'),
    ("POST", "/create", SJ, b""),
    ("POST", "/create", SJ, b'{"split":"nope","index":0}'),
    ("POST", "/create", SJ, b'{"env_name":"nosuch","split":"train","index":0}'),
    ("POST", "/create", {**SJ, "X-Secrets": "%%%"}, b'{"split":"train","index":0}'),
    ("GET", "/gsm8k/prompt", S, None),
    ("POST", "/ping", S, None),
    ("POST", "/create", SJ, b'{"split":"train","index":0}'),
    ("POST", "/create", SJ, b'{"split":"train","index":0}'),
    ("POST", "/ping", S, None),
    ("POST", "/ping", {}, None),
    ("GET", "/gsm8k/prompt", S, None),
    ("GET", "/nosuch/prompt", S, None),
    ("GET", "/gsm8k/messages", S, None),
    ("GET", "/gsm8k/task_tools", S, None),
    ("POST", "/gsm8k/call", SJ, b'{"name":"nope","input":{}}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"submit","input":{"wrong":1}}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"submit"}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"submit","input":[1]}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"x","input":{},"task_id":"deadbeef"}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"submit","input":{"answer":"72"}}'),
    ("POST", "/gsm8k/call", SJ, b'{"name":"submit","input":{"answer":"72"}}'),
    ("POST", "/gsm8k/score_group", SJ, b'{"candidates":[]}'),
    ("POST", "/delete", S, None),
    ("POST", "/delete", S, None),
    ("GET", "/gsm8k/prompt", S, None),
    ("POST", "/delete_session", S, None),
    ("POST", "/create_session", {}, b"{}"),
    ("GET", "/gsm8k/tools/", {}, None),
]

_IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


async def _run(app: Any, gsm8k: Environment) -> list[tuple[int, bytes, str | None, str | None]]:
    out = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for method, path, headers, body in SCRIPT:
            r = await client.request(method, path, headers=headers, content=body)
            out.append(
                (
                    r.status_code,
                    _IDS.sub(b"<id>", r.content),
                    r.headers.get("content-type"),
                    r.headers.get("location"),
                )
            )
    return out


@pytest.mark.asyncio
async def test_front_door_matches_fastapi(gsm8k: Environment) -> None:
    fast = create_app([gsm8k])
    plain = create_app([gsm8k])
    via_front = await _run(fast, gsm8k)
    # The same app entered past the front door: FastAPI routing alone (plus the redirect).
    via_fastapi = await _run(_FastAPIOnly(plain), gsm8k)
    assert len(via_front) == len(SCRIPT)
    assert fast.front.served >= 30  # most of the script was answered by the front door
    for step, (a, b) in enumerate(zip(via_front, via_fastapi, strict=True)):
        assert a == b, (step, SCRIPT[step][:2])


class _FastAPIOnly:
    """Redirects like the front door, then always hands over to FastAPI."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        front = self.app.front
        first = scope["path"].split("/")[1].lower() if scope["type"] == "http" else ""
        if scope["type"] == "http" and first not in front.ctx.envs and first not in front.roots:
            return await front(scope, receive, send)
        await self.app.fastapi_call(scope, receive, send)


def test_root_paths_are_the_fixed_routes(gsm8k: Environment) -> None:
    assert create_app([gsm8k]).front.roots == {
        "health",
        "ping",
        "list_environments",
        "create",
        "delete",
        "create_session",
        "delete_session",
        "version",
        "docs",
        "redoc",
        "openapi.json",
        "catalog",
    }


@pytest.mark.asyncio
async def test_a_declared_length_of_thousands_of_digits_is_a_413_not_a_500(gsm8k: Environment) -> None:
    """uvicorn's parser refuses such a header; an ASGI server that passes it on (or the
    in-process transport) reaches the door's own check, which must not int() 5,000 digits."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": b"{}", "more_body": False}

    replies: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        replies.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/gsm8k/num_tasks",
        "raw_path": b"/gsm8k/num_tasks",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"9" * 5000)],
        "client": ("127.0.0.1", 5),
    }
    await create_app([gsm8k])(scope, receive, send)
    assert replies[0]["status"] == 413
    assert replies[1]["body"] == b'{"detail":"the request body is larger than 1,048,576 bytes"}'
