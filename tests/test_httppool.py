"""The bounded connection pool (envbuilder.httppool): thousands of requests over a few
connections, each waiter served in arrival order, the slot of a failed or cancelled request
passed on, a bounded wait, stale connections replaced. Real uvicorn servers, real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
import orjson
import pytest

from envbuilder.client import AsyncClient
from envbuilder.httppool import PoolTransport
from tests.servers import free_port, serve_app


@dataclass
class Held:
    """An ASGI app: ``/hold`` answers once ``/open`` was called (then every later one at once);
    every other path answers at once with its path. Counts requests in flight and the client
    ports (connections) it saw."""

    in_flight: int = 0
    peak: int = 0
    answered: list[str] = field(default_factory=list)
    peers: set[tuple[str, int]] = field(default_factory=set)
    opened: asyncio.Event | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.opened = asyncio.Event()
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert self.opened is not None
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        self.peers.add(tuple(scope["client"]))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if path == "/open":
            self.opened.set()
        elif path == "/hold":
            await self.opened.wait()
        self.in_flight -= 1
        self.answered.append(path)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps({"task": {"path": path}})})


@pytest.fixture
def held() -> Iterator[tuple[Held, str]]:
    app = Held()
    with serve_app(app, backlog=4096, timeout_keep_alive=3600) as url:
        yield app, url


def origin(url: str) -> httpcore.Origin:
    return httpcore.URL(url).origin


def said(response: httpx.Response) -> str:
    """The path the app answered."""
    return str(response.json()["task"]["path"])


def test_4096_calls_over_a_pool_of_8_finish_on_8_connections(held: tuple[Held, str]) -> None:
    app, url = held

    async def main() -> tuple[list[Any], PoolTransport, int]:
        async with AsyncClient(url, max_connections=8) as client:
            transport = client.http._client._transport
            assert isinstance(transport, PoolTransport)
            env = client.environment("held")
            calls = [asyncio.ensure_future(env.task("test", i)) for i in range(4096)]
            await asyncio.sleep(0.05)
            pool = transport.host(origin(url))
            queued = pool.waiting  # every call past the 8 connections waits in the pool's queue
            answers = await asyncio.wait_for(asyncio.gather(*calls), timeout=1200)
            assert (pool.open, pool.idle, pool.waiting) == (8, 8, 0)  # all kept, none left waiting
            return answers, transport, queued

    answers, transport, queued = asyncio.run(main())
    assert len(answers) == 4096
    assert app.answered.count("/held/task") == 4096
    assert queued >= 4096 - 8 - 100  # thousands waited at once (a few may have finished already)
    assert app.peak <= 8 and transport.peak_connections == 8
    assert len(app.peers) == 8  # each connection reused, never one per call


def test_waiters_are_served_in_arrival_order_and_a_cancelled_one_takes_no_slot(
    held: tuple[Held, str],
) -> None:
    app, url = held

    async def main() -> list[str]:
        transport = PoolTransport(max_connections=1)
        async with (
            httpx.AsyncClient(transport=transport, base_url=url) as client,
            httpx.AsyncClient() as other,
        ):
            first = asyncio.ensure_future(client.get("/hold"))
            while not app.in_flight:
                await asyncio.sleep(0.01)
            queued = [asyncio.ensure_future(client.get(f"/n{i}")) for i in range(4)]
            await asyncio.sleep(0.05)
            pool = transport.host(origin(url))
            assert (pool.open, pool.waiting) == (1, 4)
            queued[1].cancel()
            await other.get(url + "/open")
            done = await asyncio.gather(first, *queued, return_exceptions=True)
            assert isinstance(done[2], asyncio.CancelledError)
            assert (pool.open, pool.idle, pool.waiting) == (1, 1, 0)
            return [said(r) for r in done if isinstance(r, httpx.Response)]

    assert asyncio.run(main()) == ["/hold", "/n0", "/n2", "/n3"]
    assert [p for p in app.answered if p.startswith("/n")] == ["/n0", "/n2", "/n3"]  # in arrival order


def test_a_slot_handed_to_a_cancelled_waiter_is_passed_on() -> None:
    async def main() -> None:
        transport = PoolTransport(max_connections=1)
        pool = transport.host(origin("http://127.0.0.1:1"))
        conn = await pool.acquire(None)  # never connected: released, it is dropped
        second = asyncio.ensure_future(pool.acquire(None))
        third = asyncio.ensure_future(pool.acquire(None))
        await asyncio.sleep(0)
        pool.release(conn)  # its slot goes to `second`...
        second.cancel()  # ...which is cancelled before it runs again
        await asyncio.gather(second, return_exceptions=True)
        await asyncio.wait_for(third, timeout=5)  # the slot reached `third`
        assert (pool.open, pool.waiting) == (1, 0)
        await transport.aclose()

    asyncio.run(main())


def test_the_wait_for_a_connection_is_bounded_by_the_pool_timeout(held: tuple[Held, str]) -> None:
    app, url = held

    async def main() -> None:
        transport = PoolTransport(max_connections=1)
        async with (
            httpx.AsyncClient(transport=transport, base_url=url) as client,
            httpx.AsyncClient() as other,
        ):
            first = asyncio.ensure_future(client.get("/hold"))
            while not app.in_flight:
                await asyncio.sleep(0.01)
            with pytest.raises(httpx.PoolTimeout, match=r"no connection free within 0\.2 s"):
                await client.get("/late", timeout=httpx.Timeout(10, pool=0.2))
            await other.get(url + "/open")
            assert said(await first) == "/hold"
            assert said(await client.get("/after")) == "/after"  # the timed-out waiter was skipped
            pool = transport.host(origin(url))
            assert (pool.open, pool.waiting) == (1, 0)

    asyncio.run(main())


def test_a_failed_connect_gives_its_slot_back() -> None:
    async def main() -> None:
        url = f"http://127.0.0.1:{free_port()}"  # nothing listens
        transport = PoolTransport(max_connections=2)
        async with httpx.AsyncClient(transport=transport, base_url=url) as client:
            for _ in range(5):  # more failures than slots: none leaks
                with pytest.raises(httpx.ConnectError):
                    await client.get("/")
            assert transport.host(origin(url)).open == 0

    asyncio.run(main())


def test_a_connection_the_server_closed_or_past_its_keepalive_is_replaced(held: tuple[Held, str]) -> None:
    app, url = held

    async def main() -> None:
        transport = PoolTransport(max_connections=4, keepalive_expiry=0.05)
        async with httpx.AsyncClient(transport=transport, base_url=url) as client:
            assert said(await client.get("/a")) == "/a"
            await asyncio.sleep(0.2)  # past the keep-alive
            assert said(await client.get("/b")) == "/b"
            assert said(await client.get("/c", headers={"connection": "close"})) == "/c"
            assert said(await client.get("/d")) == "/d"
            assert transport.host(origin(url)).open == 1

    asyncio.run(main())
    assert len(app.peers) == 3  # /a; /b and /c on a second; /d on a third


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("notaurl/v1/x", "is missing an 'http://' or 'https://' protocol"),
        ("ftp://example.com/x", "has an unsupported protocol 'ftp://'"),
        ("http://:80/x", "has no host"),
        ("http:///v1/x", "has no host"),
    ],
)
async def test_a_url_without_an_http_scheme_or_a_host_is_httpxs_error(url: str, problem: str) -> None:
    """As with httpx's own transport: UnsupportedProtocol (a TransportError), not a KeyError."""
    transport = PoolTransport()
    with pytest.raises(httpx.UnsupportedProtocol) as caught:
        await transport.handle_async_request(httpx.Request("POST", url, json={}))
    assert problem in str(caught.value)
    async with httpx.AsyncClient(transport=transport) as client:  # as a client sends it too
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.post(url, json={})
