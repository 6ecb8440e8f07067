"""Thousands of requests in flight through one client: all finish, over at most the pool's
connections, each reused (httpx's default pool queued them all in httpcore, whose bookkeeping
costs the square of the queue, and kept only 20 of its 100 connections alive)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from envbuilder.client import AsyncClient, Client
from tests.servers import serve_app


@dataclass
class Counting:
    """An ORS-shaped ASGI app that counts requests in flight and the client connections used.

    Every answer waits until ``hold`` requests are in flight at once (so the pool is seen full),
    then every request is answered at once."""

    hold: int
    in_flight: int = 0
    peak: int = 0
    answered: int = 0
    peers: set[tuple[str, int]] = field(default_factory=set)
    full: asyncio.Event | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.full = asyncio.Event()
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert self.full is not None
        while (await receive()).get("more_body"):
            pass
        self.peers.add(tuple(scope["client"]))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight >= self.hold:
            self.full.set()
        await self.full.wait()
        self.in_flight -= 1
        self.answered += 1
        body = ["counting"] if scope["path"] == "/list_environments" else {"task": {"path": scope["path"]}}
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps(body)})


@pytest.fixture
def counting(request: pytest.FixtureRequest) -> Iterator[tuple[Counting, str]]:
    app = Counting(hold=request.param)
    # keep-alive as long as the test: on a loaded machine a connection may idle past 5 s
    with serve_app(app, backlog=4096, timeout_keep_alive=3600) as url:
        yield app, url


@pytest.mark.parametrize("counting", [100], indirect=True)
def test_async_client_2048_in_flight_finish_over_its_pool(counting: tuple[Counting, str]) -> None:
    app, url = counting

    async def main() -> list[Any]:
        async with AsyncClient(url) as client:  # the default pool: 100 connections
            env = client.environment("counting")
            calls = [env.task("test", i) for i in range(2048)]
            return await asyncio.wait_for(asyncio.gather(*calls), timeout=600)

    answers = asyncio.run(main())
    assert len(answers) == 2048 and answers[0] == {"path": "/counting/task"}
    assert app.answered == 2048
    assert app.peak == 100  # the pool filled up and never went past its limit
    # connections kept alive and reused: a rare one replaced (a stalled loop), never one per call
    assert len(app.peers) <= 110


@pytest.mark.parametrize("counting", [6], indirect=True)
def test_sync_client_threads_share_a_bounded_pool(counting: tuple[Counting, str]) -> None:
    app, url = counting
    answers: list[Any] = []
    with Client(url, max_connections=6) as client:
        env = client.environment("counting")

        def call(i: int) -> None:
            answers.append(env.task("test", i))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(300)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    assert len(answers) == 300
    assert app.peak == 6
    assert len(app.peers) <= 8


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections must be at least 1, not 0"):
        AsyncClient("http://127.0.0.1:1", max_connections=0)
