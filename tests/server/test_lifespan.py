"""What a server's lifespan does to the process: the garbage collector waits longer while it runs
(a full collection scans every open session's objects with the event loop stopped), and the
process gets the collector it had back when the server stops."""

from __future__ import annotations

import gc
import weakref

import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings
from envbuilder.server._context import ServerContext
from envbuilder.server._lifespan import GC_THRESHOLDS, server_lifespan


async def test_the_collector_waits_longer_while_the_server_runs(gsm8k: Environment) -> None:
    # Python's own thresholds first: another server still running in this test process (an
    # in-thread fixture) has set the process's collector to the server's.
    outer = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        async with server_lifespan(ServerContext([gsm8k], ServerSettings()))(None):
            assert gc.get_threshold() == GC_THRESHOLDS != (700, 10, 10)
            assert gc.get_freeze_count() > 0  # what start-up built is out of the scans
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*outer)


async def test_the_collector_is_given_back_when_the_server_fails(gsm8k: Environment) -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="boom"):
        async with server_lifespan(ServerContext([gsm8k], ServerSettings()))(None):
            raise RuntimeError("boom")
    assert gc.get_threshold() == before


def test_young_collections_still_free_cycles_while_the_server_runs() -> None:
    """The thresholds delay collections; they do not stop them: a cycle dropped by its last
    reference is freed after enough new objects, and by an explicit collection at once."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:

        class Node:
            other: object = None

        collected = []
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a, lambda _: collected.append(True))
        del a, b
        keep = [[] for _ in range(3 * GC_THRESHOLDS[0])]  # new tracked objects: a young collection
        assert ref() is None and collected
        del keep
    finally:
        gc.set_threshold(*before)
