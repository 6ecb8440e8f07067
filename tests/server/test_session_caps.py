"""Session caps in the stores: in all and per client, freed by delete and by the reaper, the
same in memory and in Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from envbuilder.episode import Episode
from envbuilder.errors import RequestRejected
from envbuilder.server._calls import CallRegistry
from envbuilder.server._sessions import Caps, SessionRecord, SessionStore, session_key

CAPS = Caps(total=5, per_client=3)


def _session(sid: str, client: str) -> SessionRecord:
    return SessionRecord(sid=sid, env="gsm8k", episode=Episode(task={"id": "test-0"}), client=client)


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield SessionStore(CallRegistry(60))
        return
    from envbuilder.server._redis import RedisStore

    redis = RedisStore(request.getfixturevalue("redis_url"), 60, 60)
    yield redis
    await redis.aclose()


async def _refused(store: Any, session: SessionRecord) -> RequestRejected:
    with pytest.raises(RequestRejected) as info:
        await store.add(session, CAPS)
    return info.value


@pytest.mark.asyncio
async def test_caps_in_all_and_per_client(store: Any) -> None:
    for i in range(3):
        assert await store.add(_session(f"a{i}", "key:a"), CAPS)
    over = await _refused(store, _session("a3", "key:a"))
    assert over.status == 429 and over.headers == {"Retry-After": "5"}
    assert over.message == (
        "this client (API key, or address without one) holds its maximum of 3 sessions; retry later"
    )
    assert await store.add(_session("b0", "key:b"), CAPS)
    assert await store.add(_session("b1", "key:b"), CAPS)
    full = await _refused(store, _session("c0", "key:c"))
    assert (full.status, full.message) == (503, "the server holds its maximum of 5 sessions; retry later")
    # An id already taken is not a new session: no cap applies, and it is not counted twice.
    assert not await store.add(_session("a0", "key:a"), CAPS) or store.shared


@pytest.mark.asyncio
async def test_a_deleted_session_frees_its_place_and_only_its_own(store: Any) -> None:
    for i in range(3):
        assert await store.add(_session(f"a{i}", "key:a"), CAPS)
    assert await store.add(_session("b0", "key:b"), CAPS)
    await store.delete(session_key("key:a", "a1"))
    await store.delete(session_key("key:a", "a1"))  # twice: freed once
    await store.delete(session_key("key:a", "unknown"))
    await store.delete(session_key("key:b", "a2"))  # another client's id: not a's session
    assert await store.add(_session("a3", "key:a"), CAPS)
    assert (await _refused(store, _session("a4", "key:a"))).status == 429
    assert await store.add(_session("b1", "key:b"), CAPS)
    assert (await _refused(store, _session("b2", "key:b"))).status == 503


@pytest.mark.asyncio
async def test_swept_sessions_free_their_places() -> None:
    store = SessionStore(CallRegistry(60))
    for i in range(3):
        assert await store.add(_session(f"a{i}", "key:a"), CAPS)
    assert [s.sid for s in store.sweep(-1)] == ["a0", "a1", "a2"]
    for i in range(3):
        assert await store.add(_session(f"n{i}", "key:a"), CAPS)
    assert len(store) == 3


@pytest.mark.asyncio
async def test_without_caps_nothing_is_refused(store: Any) -> None:
    for i in range(8):
        assert await store.add(_session(f"a{i}", "key:a"))


def test_a_clients_default_share(gsm8k: Any) -> None:
    from envbuilder.server._context import ServerContext, ServerSettings, fair_share

    assert [fair_share(c) for c in (100_000, 2048, 100, 10, 1)] == [25_000, 512, 64, 10, 1]
    assert ServerContext([gsm8k], ServerSettings(max_sessions=1000)).caps == Caps(1000, 250)
    assert ServerContext([gsm8k], ServerSettings(max_sessions=1000, max_sessions_per_client=7)).caps == Caps(
        1000, 7
    )


@pytest.mark.asyncio
async def test_deleting_one_of_a_clients_sessions_frees_one_place_only() -> None:
    store = SessionStore(CallRegistry(60))
    assert await store.add(_session("a0", "key:a"), CAPS)
    assert await store.add(_session("a1", "key:a"), CAPS)
    await store.delete(session_key("key:a", "a0"))
    assert await store.add(_session("a2", "key:a"), CAPS)
    assert await store.add(_session("a3", "key:a"), CAPS)
    assert (await _refused(store, _session("a4", "key:a"))).status == 429


def test_a_sessions_client_survives_its_record() -> None:
    """The record keeps who opened it (the Redis store frees that client's place on delete)."""
    session = _session("s", "key:abc")
    assert SessionRecord.from_dict(session.to_dict()).client == "key:abc"
    import orjson

    assert orjson.loads(session.to_json())["client"] == "key:abc"
    assert SessionRecord.from_dict({k: v for k, v in session.to_dict().items() if k != "client"}).client == ""


@pytest.mark.asyncio
async def test_a_client_without_sessions_leaves_no_count_behind() -> None:
    """Clients are named by address without keys: their counts must not pile up."""
    store = SessionStore(CallRegistry(60))
    for i in range(2):
        assert await store.add(_session(f"a{i}", "addr:10.0.0.1"), CAPS)
    await store.delete(session_key("addr:10.0.0.1", "a0"))
    assert store._per_client == {"addr:10.0.0.1": 1}
    await store.delete(session_key("addr:10.0.0.1", "a1"))
    assert store._per_client == {}
    assert await store.add(_session("b", "addr:10.0.0.2"), CAPS)
    assert [s.sid for s in store.sweep(-1)] == ["b"] and store._per_client == {}


@pytest.mark.asyncio
async def test_a_session_kept_alive_past_its_first_expiry_still_counts(redis_url: str) -> None:
    """Redis counts a client's sessions in a sorted set scored by their expiry as last known; a
    session renewed by use past that score is found alive (its own key's TTL) and still counts."""
    import asyncio

    from envbuilder.server._redis import RedisStore

    store = RedisStore(redis_url, session_timeout=0.5, call_linger=60)
    caps = Caps(total=10, per_client=1)
    try:
        held = _session("a0", "key:a")
        assert await store.add(held, caps)
        for _ in range(5):  # renewed by use for longer than its first expiry
            await asyncio.sleep(0.2)
            assert await store.get(held.key) is not None
        with pytest.raises(RequestRejected) as over:
            await store.add(_session("a1", "key:a"), caps)
        assert over.value.status == 429
        import redis

        while redis.Redis.from_url(redis_url).pttl("eb:s:" + held.key) > 0:  # it expires, unused
            await asyncio.sleep(0.1)
        assert await store.add(_session("a1", "key:a"), caps)
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_expired_sessions_leave_no_counts_behind_in_redis(redis_url: str) -> None:
    """A client that never comes back: its expired sessions leave its set when anyone adds one."""
    import asyncio

    import redis

    from envbuilder.server._redis import RedisStore

    r = redis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, session_timeout=0.2, call_linger=60)
    try:
        assert await store.add(_session("gone", "addr:10.0.0.9"), CAPS)
        assert r.zcard("eb:by:addr:10.0.0.9") == 1
        while r.exists("eb:s:" + session_key("addr:10.0.0.9", "gone")):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.05)  # (past its score too)
        assert await store.add(_session("new", "addr:10.0.0.10"), CAPS)
        assert not r.exists("eb:by:addr:10.0.0.9") and r.zcard("eb:live") == 1
    finally:
        await store.aclose()
