"""``--max-containers`` across replicas: two real servers on one real Redis and the real engine
never run more session containers than the bound between them, and a killed server's places
come back (its unbound places when their lease ends, its sessions' when the sessions end)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from envbuilder.isolation.sandbox._docker import LABEL
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from envbuilder.server._places import PLACES, SharedPlaces
from envbuilder.server._redis import RedisStore
from tests.processes import serve_process
from tests.redisd import redis_server
from tests.sandboxes import needs_base_image, wait_for

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "tests" / "fixtures" / "harbor" / "harbor.yaml")
HELLO = 1


def test_places_are_leases_that_end_unless_renewed() -> None:
    """The store's places on their own: at most ``size``, one per name, back when a lease ends
    or is given back, renewed for the names still in use."""

    async def play(url: str) -> None:
        store = RedisStore(url, 60, 60)
        try:
            await places_of(store)
        finally:
            await store.aclose()

    async def places_of(store: RedisStore) -> None:
        places = SharedPlaces(store, 2, lease=0.4)
        assert await places.take("a") and await places.take("b")
        assert not await places.take("c")  # both places are taken
        assert await places.take("a")  # a name that has one keeps it (renewed)
        assert await places.renew(["a", "given-back"]) == 2  # (a place given back is not renewed)
        await asyncio.sleep(0.25)
        assert await places.renew(["a"]) == 2
        await asyncio.sleep(0.25)  # b's lease ended (its server died); a's was renewed
        assert await places.renew(["a"]) == 1
        assert await places.take("c")
        assert not await places.wait("d", 0.3)  # waited, then refused
        await places.give(["c"])
        assert await places.wait("d", 0.3)
        assert sorted(m.decode() for m in await store._do(b"ZRANGE", PLACES, 0, -1)) == ["a", "d"]

    with redis_server() as redis:
        asyncio.run(play(redis.url))


def _containers(labels: dict[str, str]) -> set[str]:
    async def query() -> list[dict[str, Any]]:
        async with Engine(EngineAddress.from_env()).connect() as api:
            return await api.containers(labels)

    return {str(c["Names"][0]).lstrip("/") for c in asyncio.run(query())}


@contextlib.contextmanager
def _counting(servers: list[str]) -> Iterator[list[int]]:
    """The most session containers of ``servers`` seen at once, polled while the block runs."""
    most = [0]
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            now = sum(len(_containers({LABEL: "session", "envbuilder.server": s})) for s in servers)
            most[0] = max(most[0], now)
            stop.wait(0.1)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield most
    finally:
        stop.set()
        thread.join()


def _create(client: httpx.Client, sid: str) -> httpx.Response:
    body = {"env_name": "harbor_fixture", "split": "test", "index": HELLO}
    return client.post("/create", json=body, headers={"X-Session-ID": sid})


def _bash(client: httpx.Client, sid: str, code: str) -> str:
    body = {"name": "bash", "input": {"code": code}}
    response = client.post("/harbor_fixture/call", json=body, headers={"X-Session-ID": sid}, timeout=120)
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        item = line[5:].strip() if line.startswith("data:") else ""
        parsed = item.startswith("{") and json.loads(item)
        if parsed and "output" in parsed:
            return "".join(b.get("text", "") for b in parsed["output"]["blocks"])
    raise AssertionError(response.text)


def _serve(store: str, server: str) -> Any:
    args = [SPEC, "--store", store, "--max-containers", "2", "--container-wait", "1"]
    args += ["--reap-interval", "0.5", "--session-timeout", "10"]
    return serve_process(*args, env={"ENVBUILDER_SERVER_ID": server})


def test_two_replicas_share_the_bound_and_a_killed_one_s_places_come_back() -> None:
    needs_base_image()
    a, b = f"test-a-{uuid.uuid4().hex[:8]}", f"test-b-{uuid.uuid4().hex[:8]}"
    with (
        redis_server() as redis,
        _serve(redis.url, a) as (url_a, process_a),
        _serve(redis.url, b) as (url_b, _),
    ):
        on_a, on_b = httpx.Client(base_url=url_a, timeout=60), httpx.Client(base_url=url_b, timeout=60)
        with on_a, on_b, _counting([a, b]) as most:
            # Four sessions at once, two on each replica: two places in all, so two are refused.
            results: dict[str, int] = {}

            def create(client: httpx.Client, sid: str) -> None:
                response = _create(client, sid)
                results[sid] = response.status_code
                if response.status_code == 503:
                    assert response.headers["retry-after"] == "5"
                    assert "maximum of 2 session containers" in response.json()["detail"]

            threads = [
                threading.Thread(target=create, args=(client, sid))
                for client, sid in ((on_a, "a1"), (on_b, "b1"), (on_a, "a2"), (on_b, "b2"))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            admitted = sorted(sid for sid, status in results.items() if status == 200)
            assert len(admitted) == 2 and sorted(results.values()) == [200, 200, 503, 503]
            for sid in admitted:
                _bash(on_a if sid.startswith("a") else on_b, sid, "touch /app/mine")
            assert on_b.get("/health").json()["container_pool"]["shared"] is True
            # Whichever replica asks, the bound is the two replicas' together.
            assert _create(on_b, "late").status_code == 503
            assert _create(on_a, "late").status_code == 503

            # a dies holding what it admitted; sessions live on in Redis, so their places stay
            # taken (their containers exist) until the sessions end: b deletes one it never
            # made, and the other expires and is reaped.
            os.killpg(process_a.pid, signal.SIGKILL)
            process_a.wait()
            assert _create(on_b, "late").status_code == 503
            first = admitted[0]
            assert on_b.post("/delete", headers={"X-Session-ID": first}).status_code == 200
            assert _create(on_b, "c1").status_code == 200
            _bash(on_b, "c1", "true")
            assert wait_for(lambda: _create(on_b, "c2").status_code == 200, 60)  # rest expired
            _bash(on_b, "c2", "true")
            assert _create(on_b, "c3").status_code == 503
            assert on_b.get("/health").json()["container_pool"]["shared_in_use"] == 2
            for sid in ("c1", "c2"):
                on_b.post("/delete", headers={"X-Session-ID": sid})
        assert most[0] <= 2, f"{most[0]} session containers ran at once with --max-containers 2"
        assert most[0] == 2  # (the count saw the containers at all)
    # b removed what it made at its end, and what a made once a's sessions ended: nothing is left
    ours = ({"envbuilder.server": a}, {"envbuilder.server": b})
    assert wait_for(lambda: not set().union(*map(_containers, ours)))
