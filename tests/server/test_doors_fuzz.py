"""Property-based differential fuzz: generated requests (paths, headers, content types, bodies)
get the same status from the lean front door and from FastAPI, and never a 5xx; with two API
keys, what one key sees of the sessions is what it would see if the other key never came."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._routes import ROUTES as TABLE
from tests.conftest import ENVS

# Every route of the one route table, plus one route the default environment answers by
# redirect (not /tasks, which streams a whole split, nor /catalog, which hashes every data file).
ROUTES = [
    *sorted(
        (route.method, route.path.replace("{env_name}", "gsm8k"))
        for route in TABLE
        if route.path not in ("/{env_name}/tasks", "/catalog")
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
        headers.append(
            (
                "x-deployment",
                draw(st.sampled_from(["gsm8k", "owner/GSM8K", "gsm8k-tools", "nosuch", "", " "])),
            )
        )
    if draw(st.booleans()):
        headers.append(("x-secrets", draw(st.sampled_from(["%%%", "e30=", "eyJhIjoxfQ==", "W10="]))))
    return method, path, headers, draw(_bodies)


def _doors(envs: list[Environment]) -> tuple[Any, Any]:
    fast = create_app(envs, ServerSettings(max_body_bytes=4096))
    plain = create_app(envs, ServerSettings(max_body_bytes=4096))
    plain.front.fast = False  # same shared checks, then always FastAPI
    return fast, plain


@pytest.mark.parametrize("served", ["one", "two"])
def test_both_doors_agree_on_generated_requests(gsm8k: Environment, served: str) -> None:
    # Two environments: X-Deployment then routes bare paths, or is a 404 for an unknown name.
    envs = [gsm8k] if served == "one" else [gsm8k, load_environment(ENVS / "gsm8k_tools.yaml")]
    fast, plain = _doors(envs)
    loop = asyncio.new_event_loop()
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        for app in (fast, plain)
    ]

    @settings(
        max_examples=300 if served == "one" else 150,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
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


KEY_A = "k-fuzz-a-0123456789abcdef"
KEY_B = "k-fuzz-b-0123456789abcdef"


SESSION_ROUTES = [(m, p) for m, p in ROUTES if p in ("/create", "/ping", "/delete") or p.count("/") == 2]


@st.composite
def session_requests(draw: Any) -> tuple[str, str, list[tuple[str, str]], bytes | None]:
    """Well-formed requests on the sessions ``s1`` and ``s2`` (a create, a tool call, a prompt,
    a delete, a re-attach): the requests through which one key could reach another's session."""
    method, path = draw(st.sampled_from(SESSION_ROUTES))
    headers = [("content-type", "application/json"), ("x-session-id", draw(st.sampled_from(SIDS[:3])))]
    body = draw(
        st.none()
        | _known.map(lambda d: json.dumps(d).encode())
        | st.builds(
            lambda answer, task_id: json.dumps(
                {"name": "submit", "input": {"answer": answer}, "task_id": task_id}
            ),
            st.sampled_from(["72", "-1"]),
            st.sampled_from(["t", "0" * 32]),
        ).map(str.encode)
    )
    return method, path, headers, body


@st.composite
def keyed_requests(draw: Any) -> tuple[str, tuple[str, str, list[tuple[str, str]], bytes | None]]:
    """A request of :func:`requests` sent by key A or key B (as X-API-Key, as a bearer token,
    or in X-Secrets as the openreward client sends it on its streaming requests)."""
    import base64

    who = draw(st.sampled_from(["a", "b"]))
    key = KEY_A if who == "a" else KEY_B
    method, path, headers, body = draw(requests() | session_requests())
    headers = [h for h in headers if h[0] != "x-secrets"]
    place = draw(st.sampled_from(["x-api-key", "authorization", "x-secrets"]))
    if place == "x-api-key":
        headers.append(("x-api-key", key))
    elif place == "authorization":
        headers.append(("authorization", f"Bearer {key}"))
    else:
        secret = {"api_key": {"value": key, "allowed_domains": []}}
        headers.append(("x-secrets", base64.b64encode(json.dumps(secret).encode()).decode()))
    return who, (method, path, headers, body)


def _detail(response: httpx.Response) -> Any:
    """What a reply says, without the random parts (task ids): an error's detail, else its
    status alone."""
    if response.status_code < 400 or not response.content or "json" not in response.headers["content-type"]:
        return None
    return response.json().get("detail")


def test_a_key_sees_only_its_own_sessions_through_both_doors(gsm8k: Environment) -> None:
    """Keys A and B send generated requests on the same session ids through both doors; a
    third server gets B's requests only. Every B request is answered there exactly as on the
    servers where A created, called and deleted sessions under those ids."""
    keyed = ServerSettings(max_body_bytes=4096, api_keys=(KEY_A, KEY_B))
    apps = [create_app([gsm8k], keyed) for _ in range(3)]
    apps[1].front.fast = False  # fast door, FastAPI, and (fast door) B's requests alone
    loop = asyncio.new_event_loop()
    clients = [httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://t") for a in apps]
    seen = {"a": 0, "b": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=keyed_requests())
    def check(request: tuple[str, tuple[str, str, list[tuple[str, str]], bytes | None]]) -> None:
        who, (method, path, headers, body) = request
        note(f"{who}: {method} {path} {headers} {body!r}")
        raw = [(k.encode(), v.encode("utf-8")) for k, v in headers]
        targets = clients if who == "b" else clients[:2]

        async def send() -> list[httpx.Response]:
            return [await c.request(method, path, headers=raw, content=body) for c in targets]

        replies = loop.run_until_complete(send())
        statuses = [r.status_code for r in replies]
        assert all(s < 500 for s in statuses), [(r.status_code, r.text) for r in replies]
        assert len(set(statuses)) == 1, [(r.status_code, r.text) for r in replies]
        assert len({str(_detail(r)) for r in replies}) == 1, [r.text for r in replies]
        seen[who] += statuses[0] == 200

    try:
        check()
    finally:
        for c in clients:
            loop.run_until_complete(c.aclose())
        loop.close()
    assert seen["a"] > 0 and seen["b"] > 0
