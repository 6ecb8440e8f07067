"""End to end: a session belongs to whoever created it (issue 31). Another API key, or without
keys another client address, gets exactly what an unknown session gets on every route that
takes ``X-Session-ID``: both front doors, the memory store and Redis, and across two replicas
sharing one Redis. The creator's episode is untouched (its attempt not spent, its session not
deleted), and both reference clients' normal flows with keys still work."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.processes import serve_process
from tests.servers import serve_app

KEY_A = "k-owner-a-0123456789abcdef"
KEY_B = "k-owner-b-0123456789abcdef"
UNKNOWN = {"detail": "Active environment not found"}

# Every route that takes X-Session-ID and reads or changes the session (``/delete``,
# ``/create`` and a re-attach by task_id are checked on their own below), by path and by the
# bare path the openreward client sends with X-Deployment.
PROBES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/ping", None),
    ("GET", "/gsm8k/prompt", None),
    ("GET", "/gsm8k/messages", None),
    ("GET", "/gsm8k/task_tools", None),
    ("POST", "/gsm8k/score_group", None),
    ("POST", "/gsm8k/call", {"name": "submit", "input": {"answer": "-1"}}),
    ("GET", "/prompt", None),
    ("GET", "/messages", None),
    ("GET", "/task_tools", None),
    ("POST", "/call", {"name": "submit", "input": {"answer": "-1"}}),
]


def _gold(gsm8k: Environment, index: int) -> str:
    return gsm8k.split("test").task(index)["answer"].split("####")[-1].strip()


def _events(text: str) -> list[tuple[str, str]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        if lines[0].startswith("event: "):
            data = "".join(x[6:] for x in lines[1:] if x.startswith("data: "))
            out.append((lines[0][7:], data))
    return out


class Client:
    """One identity: an httpx client with its key (if any), from its own source address."""

    def __init__(self, url: str, key: str | None = None, address: str = "127.0.0.1"):
        transport = httpx.HTTPTransport(local_address=address)
        headers = {"X-API-Key": key} if key else {}
        self.http = httpx.Client(base_url=url, headers=headers, transport=transport, timeout=30)

    def create(self, sid: str, index: int) -> httpx.Response:
        return self.http.post(
            "/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": index}
        )

    def probe(self, method: str, path: str, sid: str, body: dict[str, Any] | None) -> httpx.Response:
        headers = {"X-Session-ID": sid, "X-Deployment": "gsm8k"}
        return self.http.request(method, path, headers=headers, json=body, follow_redirects=False)

    def submit(self, sid: str, answer: str) -> tuple[str, dict[str, Any]]:
        r = self.http.post(
            "/gsm8k/call", headers={"X-Session-ID": sid}, json={"name": "submit", "input": {"answer": answer}}
        )
        assert r.status_code == 200, r.text
        events = _events(r.text)
        assert events[0][0] == "task_id", r.text
        return events[0][1], json.loads(events[-1][1])

    def close(self) -> None:
        self.http.close()


@contextlib.contextmanager
def _clients(url: str, *identities: tuple[str | None, str]) -> Iterator[list[Client]]:
    clients = [Client(url, key, address) for key, address in identities]
    try:
        yield clients
    finally:
        for c in clients:
            c.close()


def _check_bound(gsm8k: Environment, owner: Client, other: Client, owner_on: Client | None = None) -> None:
    """``owner`` creates a session; ``other`` probes it everywhere and gets the unknown
    session's answers; the owner (or ``owner_on``, the owner through another replica) then
    plays it with its one attempt intact."""
    again = owner_on or owner
    sid = uuid.uuid4().hex
    assert owner.create(sid, 3).status_code == 200
    prompt = again.probe("GET", "/gsm8k/prompt", sid, None)
    assert prompt.status_code == 200 and gsm8k.split("test").task(3)["question"] in prompt.text
    never = uuid.uuid4().hex  # what an unknown session gets, as the baseline
    for method, path, body in PROBES:
        unknown = other.probe(method, path, never, body)
        theirs = other.probe(method, path, sid, body)
        assert (
            (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json()) == (404, UNKNOWN)
        ), (
            method,
            path,
            theirs.text,
        )
    # /delete is idempotent: an unknown session's answer, and nothing is deleted.
    r = other.probe("POST", "/delete", sid, None)
    assert (r.status_code, r.json()) == (200, {"sid": sid})
    assert again.probe("POST", "/ping", sid, None).status_code == 200
    # /create under the same id makes the other client's own session, not a clash or a takeover.
    assert other.create(sid, 5).status_code == 200
    theirs = other.probe("GET", "/gsm8k/prompt", sid, None)
    assert gsm8k.split("test").task(5)["question"] in theirs.text
    mine = again.probe("GET", "/gsm8k/prompt", sid, None)
    assert gsm8k.split("test").task(3)["question"] in mine.text
    # A re-attach by task_id finds only the caller's own calls.
    task_id, first = other.submit(sid, "-1")
    r = again.probe("POST", "/gsm8k/call", sid, {"name": "submit", "input": {}, "task_id": task_id})
    assert _events(r.text) == [("error", "unknown task_id")], r.text
    # The owner's one attempt was not spent by any probe: the gold answer scores 1.
    mine_id, out = owner.submit(sid, _gold(gsm8k, 3))
    assert (out["output"]["reward"], out["output"]["finished"]) == (1.0, True)
    r = other.probe("POST", "/gsm8k/call", sid, {"name": "submit", "input": {}, "task_id": mine_id})
    assert _events(r.text) == [("error", "unknown task_id")], r.text
    r = other.probe("POST", "/gsm8k/call", sid, {"name": "submit", "input": {}, "task_id": task_id})
    replay = _events(r.text)  # its own call replays
    assert [e[0] for e in replay] == ["task_id", "end"] and replay[0][1] == task_id
    assert json.loads(replay[1][1]) == first
    assert again.probe("POST", "/delete", sid, None).status_code == 200
    assert owner.probe("POST", "/ping", sid, None).status_code == 404
    assert other.probe("POST", "/ping", sid, None).status_code == 200  # its own session lives on


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> str:
    return "memory" if request.param == "memory" else str(request.getfixturevalue("redis_url"))


@pytest.mark.parametrize("door", ["fast", "fastapi"])
def test_another_key_gets_404_on_every_session_route(gsm8k: Environment, store: str, door: str) -> None:
    settings = ServerSettings(api_keys=(KEY_A, KEY_B), store=store, ping_interval=0.2)
    app = create_app([gsm8k], settings)
    app.front.fast = door == "fast"
    with (
        serve_app(app, **uvicorn_options(settings)) as url,
        _clients(url, (KEY_A, "127.0.0.1"), (KEY_B, "127.0.0.1")) as (a, b),
    ):
        _check_bound(gsm8k, a, b)


def test_without_keys_a_session_belongs_to_its_address(gsm8k: Environment, store: str) -> None:
    settings = ServerSettings(store=store)
    with (
        serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url,
        _clients(url, (None, "127.0.0.2"), (None, "127.0.0.3"), (None, "127.0.0.2")) as (a, b, neighbour),
    ):
        _check_bound(gsm8k, a, b)
        # Clients behind one address share it: each keeps its own sessions by their ids.
        mine, theirs = uuid.uuid4().hex, uuid.uuid4().hex
        assert a.create(mine, 0).status_code == 200 and neighbour.create(theirs, 1).status_code == 200
        _, out = neighbour.submit(theirs, _gold(gsm8k, 1))
        assert out["output"]["reward"] == 1.0
        _, out = a.submit(mine, _gold(gsm8k, 0))
        assert out["output"]["reward"] == 1.0


def test_the_binding_holds_across_replicas(gsm8k: Environment, redis_url: str) -> None:
    spec = str(ENVS / "gsm8k.yaml")
    with contextlib.ExitStack() as stack:
        env = {"ENVBUILDER_API_KEYS": f"{KEY_A},{KEY_B}"}
        one, two = (
            stack.enter_context(serve_process(spec, "--store", redis_url, env=env))[0] for _ in range(2)
        )
        a, b, a_on_two = (
            stack.enter_context(_clients(url, (key, "127.0.0.1")))[0]
            for url, key in ((one, KEY_A), (two, KEY_B), (two, KEY_A))
        )
        _check_bound(gsm8k, a, b, owner_on=a_on_two)


def test_both_reference_clients_with_keys_play_their_own_sessions(gsm8k: Environment, store: str) -> None:
    """ors-sdk (X-API-Key on every request) and openreward (the key in X-Secrets on its
    streaming requests) each play episodes on one keyed server, side by side."""
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    settings = ServerSettings(api_keys=(KEY_A, KEY_B), store=store, ping_interval=0.2)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url:
        api = EnvironmentsAPI(base_url=url, api_key=KEY_B)
        with ORS(base_url=url, api_key=KEY_A) as client:
            ors_env = client.environment("gsm8k")
            or_env = api.get(name="gsm8k", variant="gsm8k")
            for i in range(3):
                with ors_env.session(split="test", index=i) as s, or_env.session(split="test", index=i) as t:
                    assert gsm8k.split("test").task(i)["question"] in s.get_prompt()[0].text
                    assert t.get_messages()[0].role == "user"
                    assert s.call_tool("submit", {"answer": _gold(gsm8k, i)}).reward == 1.0
                    assert t.call_tool("submit", {"answer": _gold(gsm8k, i)}).reward == 1.0
            task = ors_env.get_task("test", 4)
            with ors_env.session(task=task) as s:
                assert s.call_tool("submit", {"answer": "-1"}).reward == 0.0
        with or_env.session(task=or_env.get_task("test", 4)) as t:
            assert t.call_tool("submit", {"answer": _gold(gsm8k, 4)}).reward == 1.0
