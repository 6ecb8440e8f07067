"""Sessions belong to their creator, in process (fast enough for mutation testing; the same
rules against real servers, replicas and the reference clients: tests/e2e/test_session_binding.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._owners import CLIENT, client_name, owned
from envbuilder.server._sessions import SessionRecord, call_key, session_key

KEY_A = "k-owner-a-0123456789abcdef"
KEY_B = "k-owner-b-0123456789abcdef"
UNKNOWN = {"detail": "Active environment not found"}
SUBMIT = {"name": "submit", "input": {"answer": "-1"}}


def _as(key: bytes | None, address: Any) -> str:
    token = CLIENT.set((key, address))
    try:
        return client_name()
    finally:
        CLIENT.reset(token)


def test_a_clients_name_is_its_keys_hash_else_its_address() -> None:
    import hashlib

    a = _as(KEY_A.encode(), ("10.0.0.1", 5))
    assert a == "key:" + hashlib.sha256(KEY_A.encode()).hexdigest()[:24]
    assert KEY_A not in a
    assert _as(KEY_A.encode(), ("10.0.0.2", 6)) == a  # the key, wherever it comes from
    assert _as(KEY_B.encode(), ("10.0.0.1", 5)) != a
    assert _as(None, ("10.0.0.1", 5)) == "addr:10.0.0.1"
    assert _as(None, ("10.0.0.1", 7)) == "addr:10.0.0.1"  # not the port: one client, many connections
    assert _as(None, ("::1", 5)) == "addr:::1"
    assert _as(None, None) == "addr:?"
    # An address a proxy forwards is the client's text: no '/' (the separator) comes through.
    assert _as(None, ("10.0.0.1/x", 5)) == "addr:10.0.0.1%2Fx"
    assert _as(None, ("a%2Fb", 5)) == "addr:a%252Fb"


def test_the_names_themselves_uncached() -> None:
    import hashlib

    from envbuilder.server._owners import _name_address, _name_key

    assert _name_key(b"k") == "key:" + hashlib.sha256(b"k").hexdigest()[:24]
    assert len(_name_key(KEY_A.encode())) == 28
    assert _name_address("10.0.0.1") == "addr:10.0.0.1"
    assert _name_address("[::1]:8") == "addr:[::1]:8" and _name_address("?") == "addr:?"
    assert _name_address("a/b c%") == "addr:a%2Fb%20c%25"


def test_a_session_key_is_its_owner_and_its_id_and_no_two_owners_share_one() -> None:
    token = CLIENT.set((None, ("10.0.0.1", 5)))
    try:
        assert owned("s1") == "addr:10.0.0.1/s1" == session_key("addr:10.0.0.1", "s1")
    finally:
        CLIENT.reset(token)
    assert session_key("key:a", "x") != session_key("key:b", "x")
    record = SessionRecord(sid="s/1", env="gsm8k", episode=None, client="key:a")  # type: ignore[arg-type]
    assert record.key == "key:a/s/1"
    # An owner's name has no '/', so its end is the first '/': ids with '/' cannot reach across.
    forged = _as(None, ("10.0.0.1/s", 5))
    assert session_key(forged, "1") != session_key("addr:10.0.0.1", "s/1")
    assert call_key("key:a/s1", "t") == "key:a/s1\tt" != call_key("key:a/s", "1\tt")


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> str:
    return "memory" if request.param == "memory" else str(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["fast", "fastapi"])
async def app(request: pytest.FixtureRequest, gsm8k: Environment, store: str) -> AsyncIterator[Any]:
    app = create_app([gsm8k], ServerSettings(api_keys=(KEY_A, KEY_B), store=store))
    app.front.fast = request.param == "fast"
    async with app.router.lifespan_context(app):
        yield app


def _client(app: Any, key: str | None = None, address: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    headers = {"X-API-Key": key} if key else {}
    return httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers)


def _events(text: str) -> list[tuple[str, str]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        if lines[0].startswith("event: "):
            out.append((lines[0][7:], "".join(x[6:] for x in lines[1:] if x.startswith("data: "))))
    return out


async def _bound(gsm8k: Environment, a: httpx.AsyncClient, b: httpx.AsyncClient) -> None:
    """``a`` creates a session; ``b`` gets the unknown session's answers for it everywhere."""
    sid = uuid.uuid4().hex
    h = {"X-Session-ID": sid}
    assert (await a.post("/create", headers=h, json={"split": "test", "index": 3})).status_code == 200
    for method, path, body in [
        ("POST", "/ping", None),
        ("GET", "/gsm8k/prompt", None),
        ("GET", "/gsm8k/messages", None),
        ("GET", "/gsm8k/task_tools", None),
        ("POST", "/gsm8k/score_group", None),
        ("POST", "/gsm8k/call", SUBMIT),
    ]:
        r = await b.request(method, path, headers=h, json=body)
        assert (r.status_code, r.json()) == (404, UNKNOWN), (method, path)
    r = await b.post("/delete", headers=h)
    assert (r.status_code, r.json()) == (200, {"sid": sid})
    assert (await a.post("/ping", headers=h)).status_code == 200  # not deleted
    # b's own session under the same id; its call is not a's, nor a re-attach to it.
    assert (await b.post("/create", headers=h, json={"split": "test", "index": 5})).status_code == 200
    theirs = _events((await b.post("/gsm8k/call", headers=h, json=SUBMIT)).text)
    assert theirs[0][0] == "task_id" and json.loads(theirs[1][1])["output"]["finished"] is True
    again = {**SUBMIT, "task_id": theirs[0][1]}
    assert _events((await a.post("/gsm8k/call", headers=h, json=again)).text) == [
        ("error", "unknown task_id")
    ]
    assert _events((await b.post("/gsm8k/call", headers=h, json=again)).text) == theirs  # its own replays
    gold = gsm8k.split("test").task(3)["answer"].split("####")[-1].strip()
    mine = _events((await a.post("/gsm8k/call", headers=h, json={**SUBMIT, "input": {"answer": gold}})).text)
    assert json.loads(mine[1][1])["output"]["reward"] == 1.0  # a's one attempt was not spent
    mine_again = {**SUBMIT, "task_id": mine[0][1]}
    assert _events((await b.post("/gsm8k/call", headers=h, json=mine_again)).text) == [
        ("error", "unknown task_id")
    ]
    assert (await a.post("/delete", headers=h)).status_code == 200
    assert (await a.post("/ping", headers=h)).status_code == 404
    assert (await b.post("/ping", headers=h)).status_code == 200  # b's own session is not a's to delete


async def test_another_key_gets_404_for_a_session(app: Any, gsm8k: Environment) -> None:
    async with _client(app, KEY_A) as a, _client(app, KEY_B) as b:
        await _bound(gsm8k, a, b)


async def test_the_key_in_x_secrets_is_the_same_owner(app: Any, gsm8k: Environment) -> None:
    """How the openreward client sends its key on streaming requests (no X-API-Key)."""
    import base64

    secret = base64.b64encode(json.dumps({"api_key": {"value": KEY_A}}).encode()).decode()
    async with _client(app, KEY_A) as a, _client(app) as a_streaming, _client(app, KEY_B) as b:
        h = {"X-Session-ID": uuid.uuid4().hex}
        assert (await a.post("/create", headers=h, json={"split": "test", "index": 0})).status_code == 200
        r = await a_streaming.post("/gsm8k/call", headers={**h, "X-Secrets": secret}, json=SUBMIT)
        assert _events(r.text)[-1][0] == "end"
        r = await b.post("/gsm8k/call", headers={**h, "X-Secrets": secret}, json=SUBMIT)
        assert r.status_code == 404  # X-API-Key names b: b's sessions


async def test_without_keys_a_session_belongs_to_its_address(gsm8k: Environment, store: str) -> None:
    app = create_app([gsm8k], ServerSettings(store=store))
    async with app.router.lifespan_context(app):
        async with _client(app, address="127.0.0.2") as a, _client(app, address="127.0.0.3") as b:
            await _bound(gsm8k, a, b)
        async with _client(app, address="127.0.0.2") as a, _client(app, address="127.0.0.2") as neighbour:
            h = {"X-Session-ID": uuid.uuid4().hex}
            assert (await a.post("/create", headers=h, json={"split": "test", "index": 0})).status_code == 200
            assert (await neighbour.post("/ping", headers=h)).status_code == 200  # one address, one owner


async def test_each_owner_has_its_own_share_of_sessions(gsm8k: Environment, store: str) -> None:
    app = create_app([gsm8k], ServerSettings(api_keys=(KEY_A, KEY_B), store=store, max_sessions_per_client=2))
    async with app.router.lifespan_context(app), _client(app, KEY_A) as a, _client(app, KEY_B) as b:
        for i in range(2):
            for c in (a, b):  # the same ids for both keys
                r = await c.post(
                    "/create", headers={"X-Session-ID": f"s{i}"}, json={"split": "test", "index": i}
                )
                assert r.status_code == 200
        r = await a.post("/create", headers={"X-Session-ID": "s2"}, json={"split": "test", "index": 0})
        assert r.status_code == 429
        await b.post("/delete", headers={"X-Session-ID": "s0"})  # b's, not a's
        r = await a.post("/create", headers={"X-Session-ID": "s2"}, json={"split": "test", "index": 0})
        assert r.status_code == 429
        await a.post("/delete", headers={"X-Session-ID": "s0"})
        r = await a.post("/create", headers={"X-Session-ID": "s2"}, json={"split": "test", "index": 0})
        assert r.status_code == 200


async def test_a_running_call_is_found_on_another_replica_by_its_owner_only(
    redis_url: str, judged: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas on one Redis, in process: key A's call waits on the judge on replica 1; on
    replica 2, key B (its own session under the same id) re-attaching with A's task_id finds
    nothing, while A follows the running call and gets its result."""
    import asyncio
    import threading

    import redis as redis_client

    from envbuilder.spec import parse_spec
    from tests.conftest import ENVS
    from tests.fakes.chat_server import ChatServer, completion

    release = threading.Event()

    def slow(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        release.wait(30)
        return 200, completion("VERDICT: CORRECT"), {}

    monkeypatch.setenv("OWNERS_JUDGE_KEY", "sk-owners")
    with ChatServer(slow) as judge:
        text = judged(judge.base_url, reference="{{ answer }}", api_key_env="OWNERS_JUDGE_KEY", cache=False)
        env = Environment(parse_spec(text, file="judged.yaml", base_dir=ENVS))
        settings = ServerSettings(api_keys=(KEY_A, KEY_B), store=redis_url, ping_interval=0.1)
        one, two = create_app([env], settings), create_app([env], settings)
        async with one.router.lifespan_context(one), two.router.lifespan_context(two):
            h = {"X-Session-ID": "s"}
            call = {"name": "submit", "input": {"answer": "18"}}
            async with _client(one, KEY_A) as a1, _client(two, KEY_A) as a2, _client(two, KEY_B) as b2:
                assert (
                    await a1.post("/create", headers=h, json={"split": "test", "index": 0})
                ).status_code == 200
                assert (
                    await b2.post("/create", headers=h, json={"split": "test", "index": 1})
                ).status_code == 200
                running = asyncio.ensure_future(a1.post("/judged/call", headers=h, json=call))
                store = redis_client.Redis.from_url(redis_url)
                while not (pending := store.keys("eb:q:*")):  # the call is announced, and waits
                    await asyncio.sleep(0.02)
                [key] = pending
                owner_sid, task_id = key.decode()[len("eb:q:") :].split("\t")
                assert owner_sid.endswith("/s") and owner_sid.startswith("key:")
                assert json.loads(store.get(key))["sid"] == owner_sid  # the session's key, not its id
                theirs = await b2.post("/judged/call", headers=h, json={**call, "task_id": task_id})
                assert _events(theirs.text) == [("error", "unknown task_id")]
                follow = asyncio.ensure_future(
                    a2.post("/judged/call", headers=h, json={**call, "task_id": task_id})
                )
                await asyncio.sleep(0.3)  # (a2 now polls the running call; it must wait, not run it)
                assert not follow.done() and len(judge.requests) == 1
                release.set()
                first, followed = await running, await follow
            ends = [_events(r.text)[-1] for r in (first, followed)]
            assert ends[0] == ends[1] and ends[0][0] == "end"
            assert json.loads(ends[0][1])["output"]["reward"] == 1.0
            assert _events(followed.text)[0] == ("task_id", task_id)
    assert len(judge.requests) == 1  # run once, on replica 1
