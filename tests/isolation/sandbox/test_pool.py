"""The container pool's places and warm containers: clients take turns for places, a wait is
bounded, warm containers never pass the bound; on a real engine, a warm container no call used
snapshots as "no changes", and one whose set-up was cut short is refused for grading."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import ContainerPool
from envbuilder.isolation.sandbox._containers import _CLAIM
from tests.sandboxes import needs_base_image

ROOT = Path(__file__).resolve().parents[3]


async def test_clients_take_turns_for_places_and_a_wait_is_bounded() -> None:
    pool = ContainerPool(2, wait=5)
    for name in ("a1", "a2"):
        assert await pool.admit("a")
        pool.hold(name)
    order: list[str] = []

    async def ask(client: str, name: str) -> None:
        assert await pool.admit(client)
        pool.hold(name)
        order.append(name)

    waiters = [asyncio.create_task(ask("a", f"a{i}")) for i in (3, 4)]
    await asyncio.sleep(0)
    waiters.append(asyncio.create_task(ask("b", "b1")))
    await asyncio.sleep(0.01)
    assert pool.waiting == 3 and pool.in_use == 2
    assert pool.release("a1") and not pool.release("a1")  # (a place is given back once)
    await asyncio.sleep(0.01)
    assert pool.release("a2")
    await asyncio.sleep(0.01)
    assert order == ["a3", "b1"]  # client a asked twice first; b's single ask goes second
    pool.release("a3")
    await asyncio.gather(*waiters)
    assert order == ["a3", "b1", "a4"] and pool.in_use == 2
    quick = ContainerPool(1, wait=0.05)
    assert await quick.admit("x")
    quick.hold("x1")
    assert not await quick.admit("y")  # no place within the wait: the caller answers 503
    assert quick.report() == {
        "max": 1, "in_use": 1, "warm": 0, "warm_target": 0, "waiting": 0, "refused": 1,
    }  # fmt: skip


class _Owner:
    def __init__(self) -> None:
        self.dropped: list[str] = []

    def drop_warm(self, name: str) -> None:
        self.dropped.append(name)


async def test_warm_containers_never_make_the_pool_pass_its_bound() -> None:
    pool = ContainerPool(2, warm=2)
    owner = _Owner()
    for name in ("w1", "w2"):
        assert pool.room()
        pool.add_warm(name, owner)
    assert not pool.room()
    assert await pool.admit("c")
    pool.hold("s1")  # a cold session (another image's): a warm container gives its place
    pool.make_room()
    assert owner.dropped == ["w1"] and pool.warm_ready == 1
    pool.take_warm("w2")  # handed to a session: no longer warm
    assert pool.warm_ready == 0


def test_snapshots_of_a_warm_container_and_of_a_cut_short_set_up(monkeypatch: pytest.MonkeyPatch) -> None:
    needs_base_image()
    monkeypatch.setenv("ENVBUILDER_SERVER_ID", f"test-{uuid.uuid4().hex[:8]}")
    from envbuilder.environment import load_environment

    env = load_environment(ROOT / "envs" / "swe_tomli.yaml")
    containers = env.containers
    assert containers is not None

    async def run() -> None:
        containers.pool = ContainerPool(warm=2)
        try:
            containers.start_warming()
            while containers.warm < 2:
                await asyncio.sleep(0.1)
            untouched, cut = containers.take_name(), containers.take_name()
            assert await containers.snapshot(untouched) is None  # no call made: nothing changed
            await containers.exec(cut, ["mkdir", _CLAIM], user=0)  # a set-up that died at once
            with pytest.raises(SandboxError, match="never completely set up"):
                await containers.snapshot(cut)
        finally:
            containers.pool = None
            await containers.aclose()

    asyncio.run(run())
