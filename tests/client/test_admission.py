"""The sync client lets at most ``max_callers`` caller threads into a call at once; the others
wait their turn in arrival order, asleep, and fail with a clear error when the client closes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from envbuilder.client import Client, ClientError, InputValidation
from envbuilder.client._admission import Admission


class Held(httpx.AsyncBaseTransport):
    """An ORS-shaped transport: ``POST /e/task`` answers ``{"task": {"index": i}}``; an index in
    ``hold`` waits until :meth:`open` is called, one in ``fail`` is refused (422). It records
    the order in which requests arrive and how many were inside it at once."""

    def __init__(self, hold: set[int] = frozenset(), fail: set[int] = frozenset()):  # type: ignore[assignment]
        self.hold, self.fail = hold, fail
        self.arrived: list[int] = []
        self.routes: list[str] = []
        self.inside = 0
        self.peak = 0
        self._open = threading.Event()
        self.on_close: Callable[[], Any] | None = None

    def open(self) -> None:
        self._open.set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.routes.append(path)
        if not path.endswith("/task"):  # session routes
            body = {"sid": "s1"} if path == "/create_session" else {}
            return httpx.Response(200, json=body)
        index = orjson.loads(request.content)["index"]
        self.arrived.append(index)
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        try:
            while index in self.hold and not self._open.is_set():
                await asyncio.sleep(0.005)
        finally:
            self.inside -= 1
        if index in self.fail:
            return httpx.Response(422, json={"detail": f"bad index {index}"})
        return httpx.Response(200, json={"task": {"index": index}})

    async def aclose(self) -> None:
        if self.on_close is not None:
            await self.on_close()


def until(condition: Callable[[], bool]) -> None:
    """Wait for a state the test has set in motion (a generous bound, only against a hang)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the state was not reached"
        time.sleep(0.002)


def waiting(client: Client) -> int:
    return client._portal.admission.waiting


def start(target: Callable[..., Any], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def signalled_when(ready: Callable[[], bool], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for SIGUSR1 while the block runs; another thread sends the signal to the main
    thread (where the block runs) once ``ready()`` holds."""

    def nudge() -> None:
        until(ready)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        start(nudge)
        yield
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_at_most_max_callers_are_inside_at_once_and_all_finish() -> None:
    transport = Held(hold=set(range(40)))
    answers: dict[int, Any] = {}
    with Client("http://t", transport=transport, max_callers=3) as client:
        env = client.environment("e")

        def call(i: int) -> None:
            answers[i] = env.task("test", i)

        threads = [start(call, i) for i in range(40)]
        until(lambda: transport.inside == 3 and waiting(client) == 37)
        transport.open()
        for t in threads:
            t.join(60)
        assert client._portal.admission.inside == 0 and waiting(client) == 0
    assert answers == {i: {"index": i} for i in range(40)}
    assert transport.peak == 3


def test_the_default_admits_the_pool_and_a_tenth_more() -> None:
    transport = Held(hold=set(range(30)))
    with Client("http://t", transport=transport, max_connections=20) as client:
        env = client.environment("e")
        threads = [start(env.task, "test", i) for i in range(30)]
        until(lambda: transport.inside == 22 and waiting(client) == 8)
        transport.open()
        for t in threads:
            t.join(60)
    assert transport.peak == 22


def test_waiters_are_served_in_arrival_order() -> None:
    transport = Held(hold={0})
    with Client("http://t", transport=transport, max_callers=1) as client:
        env = client.environment("e")
        threads = [start(env.task, "test", 0)]
        until(lambda: transport.inside == 1)
        for i in range(1, 12):  # each one queued before the next comes
            threads.append(start(env.task, "test", i))
            until(lambda i=i: waiting(client) == i)  # type: ignore[misc]
        transport.open()
        for t in threads:
            t.join(60)
    assert transport.arrived == list(range(12))


def test_a_call_that_raises_gives_its_turn_back() -> None:
    transport = Held(hold={0}, fail={0, 2})
    failures: list[Exception] = []
    with Client("http://t", transport=transport, max_callers=1) as client:
        env = client.environment("e")

        def call(i: int) -> None:
            try:
                env.task("test", i)
            except InputValidation as exc:
                failures.append(exc)

        first = start(call, 0)
        until(lambda: transport.inside == 1)
        second = start(call, 1)
        until(lambda: waiting(client) == 1)
        transport.open()
        first.join(60)
        second.join(60)
        assert len(failures) == 1 and transport.arrived == [0, 1]
        with pytest.raises(InputValidation):  # on the caller's own thread, too
            env.task("test", 2)
        assert env.task("test", 3) == {"index": 3}  # the permit came back each time
        assert client._portal.admission.inside == 0


def test_close_fails_the_waiters_with_a_clear_error_and_lets_the_running_call_end() -> None:
    transport = Held(hold={0})
    results: dict[int, Any] = {}
    running_done: concurrent.futures.Future[None] = concurrent.futures.Future()
    client = Client("http://t", transport=transport, max_callers=1)
    env = client.environment("e")

    def call(i: int) -> None:
        try:
            results[i] = env.task("test", i)
        except ClientError as exc:
            results[i] = exc
        if i == 0:
            running_done.set_result(None)

    async def on_close() -> None:  # the running call ends before the loop stops
        transport.open()
        await asyncio.wrap_future(running_done)

    transport.on_close = on_close
    threads = [start(call, 0)]
    until(lambda: transport.inside == 1)
    threads += [start(call, i) for i in (1, 2)]
    until(lambda: waiting(client) == 2)
    client.close()
    for t in threads:
        t.join(60)
    assert results[0] == {"index": 0}
    closed = "the client is closed (Client.close() was called): make calls before closing it"
    for i in (1, 2):
        assert type(results[i]) is ClientError and str(results[i]) == closed
    assert transport.arrived == [0]
    with pytest.raises(ClientError, match="the client is closed"):  # and no un-awaited coroutine
        env.task("test", 3)


def test_a_single_caller_is_unaffected_and_pings_take_no_turn() -> None:
    transport = Held(hold={0})
    with Client("http://t", transport=transport, max_callers=1, ping_interval=0.01) as client:
        env = client.environment("e")
        assert [env.task("test", i) for i in range(1, 50)] == [{"index": i} for i in range(1, 50)]
        with env.session(split="test", index=1) as session:
            pinged = transport.routes.count("/ping")
            call = start(env.task, "test", 0)  # holds the only permit
            until(lambda: transport.inside == 1)
            until(lambda: transport.routes.count("/ping") > pinged + 2)  # the loop pings on
            transport.open()
            call.join(60)
            session.ping()
        assert client._portal.admission.inside == 0 and waiting(client) == 0


def test_a_call_from_a_callback_inside_a_call_does_not_wait_for_itself() -> None:
    transport = Held(hold={0})
    nested: list[Any] = []

    with Client("http://t", transport=transport, max_callers=1) as client:
        env = client.environment("e")

        def handler(signum: int, frame: Any) -> None:  # runs on the main thread, inside its call
            nested.append(env.task("test", 5))
            transport.open()

        with signalled_when(lambda: transport.inside == 1, handler):
            assert env.task("test", 0) == {"index": 0}
    assert nested == [{"index": 5}]


def test_a_waiter_interrupted_leaves_the_queue_and_takes_no_permit() -> None:
    admission = Admission(1)
    admission.enter()  # held by this test, on another thread's behalf
    interrupted: list[BaseException] = []

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    with signalled_when(lambda: admission.waiting == 1, handler):
        try:
            admission.enter()
        except KeyboardInterrupt as exc:
            interrupted.append(exc)
    assert len(interrupted) == 1 and admission.waiting == 0
    admission.leave()
    assert admission.inside == 0
    admission.enter()  # the permit is free, not lost to the interrupted waiter
    assert admission.inside == 1


def test_max_callers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_callers must be at least 1, not 0"):
        Client("http://127.0.0.1:1", max_callers=0)
