"""The Redis session store against a real redis-server: shared sessions, versioned saves,
call results on any server, TTLs, and an outage answered with 503 and recovered from."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import RequestRejected
from envbuilder.server import ServerSettings, create_app
from envbuilder.server._redis import PendingCall, RedisStore
from envbuilder.server._sessions import SessionRecord, session_key
from tests.redisd import RedisServer
from tests.servers import serve_app

H = {"X-Session-ID": "s1"}
TASK = {"split": "test", "index": 0}


def _answer(gsm8k: Environment) -> str:
    return gsm8k.split("test").task(0)["answer"].split("####")[-1].strip()


def _result(text: str) -> tuple[str | None, str]:
    """(task_id, the data of the last event) of an SSE body."""
    task_id = None
    last = ""
    for block in text.strip().split("\r\n\r\n"):
        name, _, data = block.partition("\r\ndata: ")
        if name == "event: task_id":
            task_id = data
        last = data
    return task_id, last


@contextlib.contextmanager
def _two_servers(
    gsm8k: Environment, url: str, **settings: float
) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    config = ServerSettings(store=url, **settings)
    with (
        serve_app(create_app([gsm8k], config)) as a,
        serve_app(create_app([gsm8k], config)) as b,
        httpx.Client(base_url=a) as ca,
        httpx.Client(base_url=b) as cb,
    ):
        yield ca, cb


def test_a_session_is_served_by_every_server(gsm8k: Environment, redis_url: str) -> None:
    with _two_servers(gsm8k, redis_url) as (a, b):
        assert a.post("/create", headers=H, json=TASK).json() == {"sid": "s1"}
        # The same create again is a retry whose answer was lost (its worker died): accepted
        # while the episode is untouched; anything else is a second session on the id.
        assert b.post("/create", headers=H, json=TASK).json() == {"sid": "s1"}
        other = {"split": "test", "index": 1}
        assert b.post("/create", headers=H, json=other).json() == {"detail": "Session already exists"}
        assert gsm8k.split("test").task(0)["question"] in b.get("/gsm8k/prompt", headers=H).json()[0]["text"]
        call = {"name": "submit", "input": {"answer": _answer(gsm8k)}}
        task_id, end = _result(a.post("/gsm8k/call", headers=H, json=call).text)
        assert '"reward":1.0' in end
        # Re-attach on the other server: the result is replayed, not graded again.
        replayed = b.post("/gsm8k/call", headers=H, json={**call, "task_id": task_id}).text
        assert _result(replayed) == (task_id, end)
        again = _result(b.post("/gsm8k/call", headers=H, json=call).text)[1]
        assert "episode has finished" in again
        assert a.post("/create", headers=H, json=TASK).json() == {"detail": "Session already exists"}
        assert b.post("/delete", headers=H).json() == {"sid": "s1"}
        assert a.post("/ping", headers=H).status_code == 404
    assert redis.Redis.from_url(redis_url).hgetall("eb:grades") == {b"correct": b"1"}


def test_a_session_expires_with_its_timeout(gsm8k: Environment, redis_url: str) -> None:
    """The session's key lives for the session timeout, each request renews it, and once Redis
    expires it every server answers 404. Expiry is driven by ``PEXPIRE`` rather than waited for,
    so a loaded machine cannot make a renewal arrive late."""
    r = redis.Redis.from_url(redis_url)
    key = "eb:s:" + session_key("addr:127.0.0.1", "s1")
    with _two_servers(gsm8k, redis_url, session_timeout=600) as (a, b):
        a.post("/create", headers=H, json=TASK)
        assert 300_000 < r.pttl(key) <= 600_000  # the timeout, not some other lifetime
        for client in (a, b, a):  # each request, on any server, renews it
            assert r.pexpire(key, 5_000)
            assert client.post("/ping", headers=H).status_code == 200
            assert r.pttl(key) > 300_000
        assert r.pexpire(key, 1)
        deadline = time.monotonic() + 30
        while r.exists(key) and time.monotonic() < deadline:  # Redis expires it, however loaded
            time.sleep(0.01)
        assert not r.exists(key)
        for client in (a, b):
            assert client.post("/ping", headers=H).json() == {"detail": "Active environment not found"}


async def test_a_save_checks_the_version_it_read(redis_url: str, gsm8k: Environment) -> None:
    store = RedisStore(redis_url, session_timeout=60, call_linger=60)
    try:
        task = gsm8k.split("test").task(0)
        assert await store.add(SessionRecord("s", "gsm8k", Episode(task=task)))
        assert await store.add(SessionRecord("s", "gsm8k", Episode(task=task)))  # a retry: equal
        assert not await store.add(SessionRecord("s", "gsm8k", Episode(task=task, attempts=1)))
        key = session_key("", "s")  # (a record's client is "" unless given)
        one, two = await store.get(key), await store.get(key)
        assert one is not None and two is not None and one.version == two.version
        first = one.version
        one.episode.attempts = two.episode.attempts = 1
        assert await store.save(one, "t1", b"frames-1", "correct")
        assert not await store.save(two, "t2", b"frames-2", "incorrect")  # read the old version
        assert await store.result("t1") == b"frames-1" and await store.result("t2") is None
        latest = await store.get(key)
        assert latest is not None and latest.version == first + 1 and latest.to_dict() == one.to_dict()
        assert await store.grades() == {"correct": 1}
        await store.delete(key)
        assert not await store.save(one, "t3", b"", "correct")  # deleted: nothing is written
        # Deleted and created again while a call on the old session ran: its save must not land.
        old = await store.get(key)
        assert old is None
        assert await store.add(SessionRecord("s", "gsm8k", Episode(task=task)))
        stale = SessionRecord("s", "gsm8k", Episode(task=task, attempts=1), version=first)
        assert not await store.save(stale, "t4", b"", "correct")
        assert await store.grades() == {"correct": 1}
    finally:
        await store.aclose()


def test_concurrent_calls_on_one_session_grade_once(gsm8k: Environment, redis_url: str) -> None:
    with _two_servers(gsm8k, redis_url) as (a, b):
        a.post("/create", headers=H, json=TASK)
        call = {"name": "submit", "input": {"answer": _answer(gsm8k)}}

        async def both() -> list[str]:
            async with (
                httpx.AsyncClient(base_url=str(a.base_url)) as x,
                httpx.AsyncClient(base_url=str(b.base_url)) as y,
            ):
                replies = await asyncio.gather(
                    *(c.post("/gsm8k/call", headers=H, json=call) for c in (x, y, x, y))
                )
            return [_result(r.text)[1] for r in replies]

        ends = asyncio.run(both())
        assert sum('"reward":1.0' in e for e in ends) == 1
        assert sum("episode has finished" in e for e in ends) == 3
    assert redis.Redis.from_url(redis_url).hgetall("eb:grades") == {b"correct": b"1"}


def test_store_outage_answers_503_and_recovers(
    gsm8k: Environment, redis_url: str, redis_session: RedisServer
) -> None:
    with _two_servers(gsm8k, redis_url) as (a, _):
        assert a.post("/create", headers=H, json=TASK).status_code == 200
        redis_session.stop()
        try:
            for method, path in (("GET", "/gsm8k/prompt"), ("POST", "/ping"), ("POST", "/gsm8k/call")):
                body = {"name": "submit", "input": {"answer": "1"}} if path.endswith("call") else None
                r = a.request(method, path, headers=H, json=body)
                assert r.status_code == 503, (path, r.text)
                assert r.headers["retry-after"] == "1"
                assert r.json() == {"detail": "the session store is unavailable; retry shortly"}
            health = a.get("/health")
            assert health.status_code == 503
            assert health.json() == {"status": "unavailable", "store": "down"}
        finally:
            redis_session.start()  # an empty Redis: the session is gone, the server is not
        assert a.get("/health").json() == {"status": "ok"}
        assert a.post("/ping", headers=H).status_code == 404
        assert a.post("/create", headers=H, json=TASK).status_code == 200


def test_workers_without_a_shared_store_are_refused() -> None:
    from typer.testing import CliRunner

    from envbuilder.cli import app

    result = CliRunner().invoke(app, ["serve", "envs/gsm8k.yaml", "--workers", "2"])
    assert result.exit_code == 2
    assert "--workers 2 needs a shared session store" in result.output
    result = CliRunner().invoke(app, ["serve", "envs/gsm8k.yaml", "--store", "mysql://x"])
    assert result.exit_code == 2
    assert "unsupported store 'mysql://x': expected memory or redis://host:port/db" in result.output


def test_the_stored_json_is_the_session_record(gsm8k: Environment) -> None:
    """``SessionRecord.to_json`` (orjson of the episode dataclass, the store's fast path) must stay
    the JSON of ``SessionRecord.to_dict`` whatever ``Episode`` grows."""
    import orjson

    episode = Episode(task=gsm8k.split("test").task(3), secrets={"K": "v"}, attempts=2, ungradeable=1)
    session = SessionRecord("s", "gsm8k", episode, last_seen=1.5)
    assert orjson.loads(session.to_json()) == orjson.loads(orjson.dumps(session.to_dict()))
    assert SessionRecord.from_dict(orjson.loads(session.to_json())) == session


# -- the store's own contract, in process (what mutation testing found untested) ------------


async def test_a_record_added_or_saved_can_be_saved_again(redis_url: str, gsm8k: Environment) -> None:
    store = RedisStore(redis_url, session_timeout=60, call_linger=60)
    r = redis.Redis.from_url(redis_url)
    try:
        record = SessionRecord("s", "gsm8k", Episode(task=gsm8k.split("test").task(0)), client="key:a")
        assert await store.add(record)
        first = record.version
        assert first == int(r.get("eb:s:key:a/s").partition(b":")[0])  # the version it stored
        # A call announced (and leased) on the session, then saved: its record goes with the save.
        assert await store.begin(record.key, "key:a/s\tc1", "submit", {"answer": "1"}) is not None
        assert r.pttl("eb:q:key:a/s\tc1") > 60_000  # announced for the linger and a lease
        assert await store.save(record, "key:a/s\tc1", b"frames-1", "incorrect")
        assert record.version == first + 1
        assert await store.pending("key:a/s\tc1") is None and await store.result("key:a/s\tc1") == b"frames-1"
        assert 0 < r.pttl("eb:c:key:a/s\tc1") <= 60_000  # kept for the linger
        assert await store.save(record, "key:a/s\tc2", b"frames-2", "correct")
        assert await store.save(record, "key:a/s\tc3", b"frames-3", "correct")
        assert record.version == first + 3
        assert await store.grades() == {"incorrect": 1, "correct": 2}
        assert 59_000 < r.pttl("eb:s:key:a/s") <= 60_000  # the session timeout, renewed by the save
        assert SessionRecord.from_dict(record.to_dict()).version == 0
    finally:
        await store.aclose()


async def test_a_call_whose_worker_stopped_renewing_is_taken_over_once(redis_url: str) -> None:
    """The lease of a worker that died lapses; the first worker to look takes it (``ours``),
    the next one finds it held."""
    dead, first, second = (RedisStore(redis_url, 60, 60) for _ in range(3))
    r = redis.Redis.from_url(redis_url)
    try:
        await dead.claim("key:a/s\tc", "key:a/s", "submit", {"answer": "7"})
        assert r.get("eb:l:key:a/s\tc") == dead._owner
        assert r.pttl("eb:q:key:a/s\tc") > 60_000 and 0 < r.pttl("eb:l:key:a/s\tc") <= 3000
        taken = await first.pending("key:a/s\tc")
        assert taken is not None and not taken.ours  # the lease is still held
        r.delete("eb:l:key:a/s\tc")  # it lapses (the dead worker renews no more)
        taken = await first.pending("key:a/s\tc")
        assert taken == PendingCall("key:a/s", "submit", {"answer": "7"}, True)
        assert r.get("eb:l:key:a/s\tc") == first._owner
        assert (await second.pending("key:a/s\tc")).ours is False  # type: ignore[union-attr]
        r.pexpire("eb:l:key:a/s\tc", 100)
        r.pexpire("eb:q:key:a/s\tc", 100)
        await first.renew("key:a/s\tc")  # a running call's lease and record live on
        assert r.pttl("eb:l:key:a/s\tc") > 2000 and r.pttl("eb:q:key:a/s\tc") > 60_000
        await first.record("key:a/s\tc", b"frames")
        assert await second.pending("key:a/s\tc") is None
        assert await second.result("key:a/s\tc") == b"frames"
    finally:
        for store in (dead, first, second):
            await store.aclose()


async def test_a_store_that_refuses_writes_or_is_down(redis_url: str, redis_session: RedisServer) -> None:
    store = RedisStore(redis_url, 60, 60)
    r = redis.Redis.from_url(redis_url)
    record = SessionRecord("s", "gsm8k", Episode(task={"id": "test-0"}), client="key:a")
    try:
        assert store.url == redis_url and store.problem is None
        assert await store.healthy() and store.problem is None
        assert (
            0 < r.pttl(b"eb:health:" + store._owner) <= 5000 and r.get(b"eb:health:" + store._owner) == b"1"
        )
        r.config_set("maxmemory", 1)
        try:
            with pytest.raises(RequestRejected) as refused:
                await store.add(record)
            assert (refused.value.status, refused.value.headers) == (503, {"Retry-After": "1"})
            assert refused.value.message == "the session store refuses writes (out of memory); retry shortly"
            with pytest.raises(RequestRejected) as refused:
                await store.record("key:a/s\tc", b"frames")  # (a command, not a script)
            assert refused.value.status == 503
            await store.delete(record.key)  # deleting frees memory: taken
            assert not await store.healthy() and store.problem == "out of memory"
        finally:
            r.config_set("maxmemory", 0)
        assert await store.healthy() and store.problem is None
        redis_session.stop()
        try:
            assert not await store.healthy() and store.problem == "down"
            with pytest.raises(RequestRejected) as down:
                await store.get(record.key)
            assert (down.value.status, down.value.headers) == (503, {"Retry-After": "1"})
        finally:
            redis_session.start()
    finally:
        await store.aclose()


def test_the_store_urls_taken() -> None:
    from envbuilder.server._redis import check_url

    for url in ("redis://127.0.0.1:6379/0", "rediss://h:6380/1", "unix:///tmp/redis.sock"):
        assert check_url(url) is None, url
    assert check_url("REDIS://h") == "unsupported store 'REDIS://h': expected memory or redis://host:port/db"
    assert check_url("redis://h:port/0").startswith("invalid store URL 'redis://h:port/0': ")


def test_a_sid_in_use_on_another_server_is_refused_before_the_task(
    gsm8k: Environment, redis_url: str
) -> None:
    """docs/protocol.md §5.1's order with a shared store: a sid in use anywhere is refused
    before the split, the index or the environment is looked at; a refused create leaves a free
    sid free."""
    with _two_servers(gsm8k, redis_url) as (a, b):
        bad = [{"split": "nope", "index": 0}, {"split": "test", "index": 10**9}, {**TASK, "env_name": "x"}]
        assert [b.post("/create", headers=H, json=body).status_code for body in bad] == [400, 400, 404]
        assert a.post("/create", headers=H, json=TASK).json() == {"sid": "s1"}
        for body in bad:
            assert b.post("/create", headers=H, json=body).json() == {"detail": "Session already exists"}
