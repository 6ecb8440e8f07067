"""The container pool on a real engine: ``serve --max-containers`` bounds the session
containers (503 with Retry-After beyond, clients in turn), warm containers are made ahead and
never handed to a second session, and ``/health`` shows the pool; with a shared store, a
container whose session is gone is removed by a replica that did not make it, or by a
restarted server."""

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
import pytest

from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from tests.processes import serve_process
from tests.redisd import redis_server
from tests.sandboxes import needs_base_image, wait_for

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "envs" / "swe_tomli.yaml")


@pytest.fixture(scope="module", autouse=True)
def _engine() -> None:
    needs_base_image()


@pytest.fixture
def cleanup() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as stack:
        yield stack


def _containers(labels: dict[str, str]) -> list[dict[str, Any]]:
    async def query() -> list[dict[str, Any]]:
        async with Engine(EngineAddress.from_env()).connect() as api:
            return await api.containers(labels)

    return asyncio.run(query())


def _names(labels: dict[str, str]) -> set[str]:
    return {str(c["Names"][0]).lstrip("/") for c in _containers(labels)}


def _create(client: httpx.Client, sid: str) -> httpx.Response:
    body = {"env_name": "swe_tomli", "split": "test", "index": 0}
    return client.post("/create", json=body, headers={"X-Session-ID": sid})


def _bash(client: httpx.Client, sid: str, code: str) -> str:
    body = {"name": "bash", "input": {"code": code}}
    response = client.post("/swe_tomli/call", json=body, headers={"X-Session-ID": sid}, timeout=120)
    assert response.status_code == 200, response.text
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    for item in data:
        with_output = item.startswith("{") and json.loads(item)
        if with_output and "output" in with_output:
            return "".join(b.get("text", "") for b in with_output["output"]["blocks"])
    raise AssertionError(response.text)


def test_the_pool_bounds_containers_keeps_warm_ones_and_never_reuses_them(
    cleanup: contextlib.ExitStack,
) -> None:
    server = f"test-{uuid.uuid4().hex[:10]}"
    mine = {"envbuilder.server": server}
    args = [SPEC, "--max-containers", "2", "--warm-containers", "1", "--container-wait", "0.5"]
    with serve_process(*args, env={"ENVBUILDER_SERVER_ID": server}) as (url, _):
        client = httpx.Client(base_url=url, timeout=60)
        cleanup.callback(client.close)
        assert wait_for(lambda: client.get("/health").json()["container_pool"]["warm"] == 1)
        warm = _names(mine)
        assert len(warm) == 1  # made ahead, before any session
        assert _create(client, "a").status_code == 200
        assert _bash(client, "a", "echo hi > note.txt; git log --format=%s") == "base"
        health = client.get("/health").json()
        assert health["containers"]["swe_tomli"]["from_warm"] == 1  # session a got the warm one
        assert health["container_pool"]["in_use"] == 1
        # the warm one is refilled (a second place is free), now for the task a asked for (its
        # tree in, set up), then b, a session of the same task, takes it as it is
        assert wait_for(lambda: client.get("/health").json()["container_pool"]["warm"] == 1)
        assert _create(client, "b").status_code == 200
        containers = client.get("/health").json()["containers"]["swe_tomli"]
        assert (containers["warm_hits"], containers["warm_misses"]) == (1, 1)
        assert _bash(client, "b", "git log --format=%s; ls note.txt 2>&1 || true").startswith("base\n")
        # two places, both taken: the third session is refused with Retry-After, not queued forever
        refused = _create(client, "c")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "maximum of 2 session containers" in refused.json()["detail"]
        pool = client.get("/health").json()["container_pool"]
        assert (pool["max"], pool["in_use"], pool["warm"], pool["refused"]) == (2, 2, 0, 1)
        before = _names(mine)
        assert len(before) == 2 and warm <= before
        # a's end frees its place; its container goes and is never handed to another session
        assert client.post("/delete", headers={"X-Session-ID": "a"}).status_code == 200
        assert wait_for(lambda: len(_names(mine)) <= 2 and not (warm & _names(mine)))
        assert _create(client, "c").status_code == 200
        assert _bash(client, "c", "ls note.txt 2>&1 || true").endswith("No such file or directory")
        assert not warm & _names(mine)
        assert len(_names(mine)) <= 2
    assert wait_for(lambda: not _names(mine))  # shutdown removed them all, warm ones included


@contextlib.contextmanager
def _kept_alive(url: str, sid: str) -> Iterator[None]:
    """Ping session ``sid`` every second from a thread, while the block runs."""
    stop = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.wait(1):
                with contextlib.suppress(httpx.HTTPError):
                    assert client.post("/ping", headers={"X-Session-ID": sid}).status_code == 200

    thread = threading.Thread(target=ping, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _serve_redis(store: str, server: str, *extra: str) -> Any:
    args = [SPEC, "--store", store, "--reap-interval", "0.5", "--session-timeout", "20", *extra]
    return serve_process(*args, env={"ENVBUILDER_SERVER_ID": server})


def test_a_replica_or_a_restarted_server_reaps_containers_of_sessions_that_are_gone(
    cleanup: contextlib.ExitStack,
) -> None:
    with redis_server() as redis:
        a, b = f"test-a-{uuid.uuid4().hex[:8]}", f"test-b-{uuid.uuid4().hex[:8]}"
        with (
            _serve_redis(redis.url, a, "--warm-containers", "1") as (url_a, process_a),
            _serve_redis(redis.url, b) as (url_b, process_b),
        ):
            on_a = httpx.Client(base_url=url_a, timeout=60)
            on_b = httpx.Client(base_url=url_b, timeout=60)
            cleanup.callback(on_a.close)
            cleanup.callback(on_b.close)
            store = on_a.get("/health").json()  # (the store's id is set before serving)
            assert "container_pool" in store
            assert _create(on_a, "s1").status_code == 200
            _bash(on_a, "s1", "echo kept > note.txt")
            made = _names({"envbuilder.server": a})
            assert len(made) >= 1
            os.killpg(process_a.pid, signal.SIGKILL)  # a dies; its session lives on in Redis
            process_a.wait()
            cleanup.enter_context(_kept_alive(url_b, "s1"))  # (while b makes s2's container)
            # b serves a's session in the container a made (found by name, state kept)
            assert _bash(on_b, "s1", "cat note.txt") == "kept"
            # s2 is abandoned on b: once it expires, b removes its container; a's warm
            # container (its maker is dead) goes too; s1's stays while its session lives
            assert _create(on_b, "s2").status_code == 200
            _bash(on_b, "s2", "true")
            s2 = _names({"envbuilder.server": b})
            assert len(s2) == 1
            assert wait_for(lambda: not s2 & _names({"envbuilder.server": b}), 90)  # expired: reaped by b
            left = _names({"envbuilder.server": a})
            assert len(left) == 1  # only s1's, which b still serves; a's warm one is gone
            # b is killed too; s1 is abandoned: a restarted a reaps it once it expired
            cleanup.close()
            os.killpg(process_b.pid, signal.SIGKILL)
            process_b.wait()
        with _serve_redis(redis.url, a):
            assert wait_for(lambda: not _names({"envbuilder.server": a}), 60)
            assert wait_for(lambda: not _names({"envbuilder.server": b}), 60)
