"""Property-based differential fuzz: generated requests (paths, headers, content types, bodies)
get the same status from the lean front door and from FastAPI, and never a 5xx."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

import httpx
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._discovery import router as discovery
from envbuilder.server._episodes import router as episodes

# Every declared route and method (the FastAPI routers are the one declaration), plus one
# route the default environment answers by redirect.
ROUTES = [
    *sorted(
        (method, route.path.replace("{env_name}", "gsm8k"))
        for router in (discovery, episodes)
        for route in router.routes
        if isinstance(route, APIRoute) and route.path != "/{env_name}/tasks"  # streams a whole split
        for method in route.methods
    ),
    ("GET", "/tools"),
]
CONTENT_TYPES = [
    "application/json", "application/json; charset=utf-8", "application/jsonx", "Application/JSON",
    "application/vnd.x+json", "text/plain", "application/octet-stream", "", "application/json;",
]  # fmt: skip
SIDS = ["s1", "s2", " s1 ", "", "x" * 129, "a\tb", "é"]

_scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63) | st.floats()
    | st.text(max_size=8) | st.sampled_from(["train", "test", "submit", "72", "-1"])
)  # fmt: skip
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_fields = st.sampled_from(
    ["split", "index", "start", "stop", "name", "input", "task_id", "task_spec", "env_name", "secrets", "x"]
)
_objects = st.dictionaries(_fields, _values, max_size=4)
_known = st.fixed_dictionaries(
    {"split": st.sampled_from(["train", "test"]), "index": st.integers(-3, 3)}
) | st.fixed_dictionaries(
    {"name": st.just("submit"), "input": st.fixed_dictionaries({"answer": st.text(max_size=6)})}
)
_bodies = (
    st.none()
    | st.binary(max_size=40)
    | _objects.map(lambda d: json.dumps(d).encode())
    | _known.map(lambda d: json.dumps(d).encode())
    | st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
_segment = st.text(alphabet="abc%ff0a/._-~é\n", max_size=6)
_paths = st.sampled_from([r[1] for r in ROUTES]) | st.builds(
    lambda a, b: "/" + a + "/" + urllib.parse.quote(b, safe="/%"),
    st.sampled_from(["gsm8k", "GSM8K", "nosuch", "health", ""]),
    _segment,
)


@st.composite
def requests(draw: Any) -> tuple[str, str, list[tuple[str, str]], bytes | None]:
    if draw(st.booleans()):
        method, path = draw(st.sampled_from(ROUTES))
    else:
        method, path = draw(st.sampled_from(["GET", "POST", "PUT", "HEAD"])), draw(_paths)
    headers = []
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type:
        headers.append(("content-type", content_type))
    for sid in draw(st.lists(st.sampled_from(SIDS), max_size=2)):  # none, one, or a duplicate
        headers.append(("x-session-id", sid))
    if draw(st.booleans()):  # how the openreward client names the environment on bare paths
        headers.append(("x-deployment", draw(st.sampled_from(["gsm8k", "owner/GSM8K", "nosuch", "", " "]))))
    if draw(st.booleans()):
        headers.append(("x-secrets", draw(st.sampled_from(["%%%", "e30=", "eyJhIjoxfQ==", "W10="]))))
    return method, path, headers, draw(_bodies)


def _doors(gsm8k: Environment) -> tuple[Any, Any]:
    fast = create_app([gsm8k], ServerSettings(max_body_bytes=4096))
    plain = create_app([gsm8k], ServerSettings(max_body_bytes=4096))
    plain.front.fast = False  # same shared checks, then always FastAPI
    return fast, plain


def test_both_doors_agree_on_generated_requests(gsm8k: Environment) -> None:
    fast, plain = _doors(gsm8k)
    loop = asyncio.new_event_loop()
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        for app in (fast, plain)
    ]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=requests())
    def check(request: tuple[str, str, list[tuple[str, str]], bytes | None]) -> None:
        method, path, headers, body = request
        note(f"{method} {path} {headers} {body!r}")

        async def both() -> list[httpx.Response]:
            raw = [(k.encode(), v.encode("utf-8")) for k, v in headers]
            return [await c.request(method, path, headers=raw, content=body) for c in clients]

        a, b = loop.run_until_complete(both())
        assert a.status_code < 500 and b.status_code < 500, (a.status_code, a.text, b.status_code, b.text)
        assert a.status_code == b.status_code, (a.status_code, a.text, b.status_code, b.text)
        assert a.headers.get("content-type") == b.headers.get("content-type")

    try:
        check()
    finally:
        for c in clients:
            loop.run_until_complete(c.aclose())
        loop.close()
    assert fast.front.served > 0 and plain.front.served == 0
