"""The multiplexed Redis connection against a real redis-server: concurrent commands share one
socket and get their own replies in order, a cancelled command does not shift the others,
scripts load once, errors are typed, and an unreachable server fails fast."""

from __future__ import annotations

import asyncio

import pytest

from envbuilder.server._resp import Address, Connection, StoreDown, StoreReplyError
from tests.servers import free_port


def test_addresses() -> None:
    assert Address.parse("redis://:pw@10.0.0.1:6380/2") == Address(
        "10.0.0.1", 6380, None, 2, "pw", None, False
    )
    assert Address.parse("rediss://u:pw@h") == Address("h", 6379, None, 0, "pw", "u", True)
    assert Address.parse("unix:///run/redis.sock?db=3") == Address(
        None, 0, "/run/redis.sock", 3, None, None, False
    )
    with pytest.raises(ValueError, match="unsupported scheme 'http'"):
        Address.parse("http://h")


async def test_concurrent_commands_get_their_own_replies(redis_url: str) -> None:
    conn = Connection(redis_url)
    try:
        await asyncio.gather(*(conn.call(b"SET", f"k{i}", f"v{i}") for i in range(200)))
        slow = asyncio.ensure_future(conn.call(b"GET", "k0"))
        slow.cancel()  # its reply still arrives, and is skipped
        got = await asyncio.gather(*(conn.call(b"GET", f"k{i}") for i in range(200)))
        assert got == [f"v{i}".encode() for i in range(200)]
        with pytest.raises(StoreReplyError, match="WRONGTYPE"):
            await conn.call(b"HGETALL", "k1")
        assert await conn.eval("return ARGV[1] .. KEYS[1]", ["k"], ["x"]) == b"xk"
        await conn.call(b"SCRIPT", b"FLUSH")
        assert await conn.eval("return ARGV[1] .. KEYS[1]", ["k"], ["y"]) == b"yk"  # reloaded
    finally:
        await conn.aclose()


async def test_an_unreachable_server_fails_fast() -> None:
    conn = Connection(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    with pytest.raises(StoreDown, match="cannot connect"):
        await conn.call(b"PING")
    await conn.aclose()
