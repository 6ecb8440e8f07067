"""Warm containers keyed by image and tree: the plan shares the budget between clients and their
recent tasks and forgets old asks; on a real engine, a session of a task takes a container made
for that task's tree as a hand-over, never one made for another task, never one another session
had, and never sees another session's files."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from envbuilder.isolation.sandbox import ContainerPool, RepositorySpec, Workspace
from envbuilder.isolation.sandbox._warm import (
    BLANK,
    KEYS_PER_CLIENT,
    MAX_CLIENTS,
    WarmKey,
    WarmPlan,
    tree_key,
)
from tests.sandboxes import needs_base_image

ROOT = Path(__file__).resolve().parents[3]
A, B, C = (WarmKey("", f"git:r@{c}") for c in "abc")


def test_a_task_key_names_its_image_and_tree_without_reading_it() -> None:
    by_commit = RepositorySpec(field="repo", commit_field="base")
    assert tree_key(by_commit, {"repo": "tomli", "base": "8917fe3"}) == "git:tomli@8917fe3"
    by_tar = RepositorySpec(tarball_field="tar")
    one, other = tree_key(by_tar, {"tar": b"x"}), tree_key(by_tar, {"tar": b"y"})
    assert one.startswith("tar:") and one != other and tree_key(by_tar, {"tar": "eA=="}) != one
    assert tree_key(None, {"repo": "tomli"}) == ""


def test_a_task_with_its_own_limits_has_a_key_of_its_own() -> None:
    # A container is made with its task's CPU and memory: it never serves a task of other limits.
    from envbuilder.isolation.sandbox import ContainerSpec, SessionContainers

    spec = ContainerSpec(image="x", workdir="/app", memory_mb=512, cpus=1.0, limits_field="limits")
    containers = SessionContainers(spec, Path("."))
    plain, same = containers.warm_key({}), containers.warm_key({"limits": '{"memory_mb": 512}'})
    small = containers.warm_key({"limits": '{"memory_mb": 300, "cpus": 0.5}'})
    assert plain == same == WarmKey() and not plain.per_task
    assert small.limits == "0.5cpu/300mb" and small.per_task and small != plain


def test_before_any_ask_the_budget_goes_to_the_default_key() -> None:
    plan = WarmPlan()
    assert plan.targets(4, WarmKey()) == {WarmKey(): 4}
    assert plan.targets(3, BLANK) == {BLANK: 3}
    assert plan.targets(3, None) == {}
    assert plan.targets(0, WarmKey()) == {}


def test_clients_share_the_budget_in_turns_and_their_recent_tasks_first() -> None:
    plan = WarmPlan()
    for key in (A, B, C):  # client x asks for many tasks; y keeps asking for one
        plan.ask("x", key, {"id": key.tree}, now=0)
    plan.ask("y", A, {"id": "a"}, now=1)
    # a blank one first (a task no one asked for starts there), then one each in turn, the most
    # recent client first: y's A, x's most recent C; y's A again, x's B; y's A again
    assert plan.targets(5, BLANK, now=2) == {BLANK: 1, A: 2, C: 1, B: 1}
    assert plan.targets(6, BLANK, now=2) == {BLANK: 1, A: 3, C: 1, B: 1}
    assert plan.targets(1, BLANK, now=2) == {A: 1}  # one container: the most recent client's task
    assert plan.task(C) == {"id": C.tree} and plan.task(WarmKey("", "none")) is None


def test_old_asks_are_forgotten_and_the_plan_is_bounded() -> None:
    plan = WarmPlan(horizon=10)
    plan.ask("x", A, {}, now=0)
    plan.ask("y", B, {}, now=8)
    assert plan.targets(2, BLANK, now=12) == {BLANK: 1, B: 1}  # x's ask is 12 s old
    assert plan.targets(2, BLANK, now=30) == {BLANK: 2}  # no one asked lately: the default
    for i in range(MAX_CLIENTS + 5):
        plan.ask(f"c{i}", A, {}, now=40)
    for i in range(KEYS_PER_CLIENT + 5):
        plan.ask("x", WarmKey("", str(i)), {}, now=40)  # (the least recent client is forgotten)
    targets = plan.targets(10_000, None, now=41)
    assert len(targets) == KEYS_PER_CLIENT + 1  # x's last 8 keys and A
    assert plan.report()["clients"] == MAX_CLIENTS


def test_a_session_takes_the_container_made_for_its_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    needs_base_image()
    monkeypatch.setenv("ENVBUILDER_SERVER_ID", f"test-{uuid.uuid4().hex[:8]}")
    from envbuilder.environment import load_environment

    env = load_environment(ROOT / "envs" / "swe_tomli.yaml")
    containers = env.containers
    assert containers is not None
    split = env.split("test")
    first, second = split.task(0), split.task(1)
    one, two = containers.warm_key(first), containers.warm_key(second)
    assert one != two and one.tree == f"git:tomli@{first['base_commit']}"

    async def wait_warm(key: WarmKey, count: int) -> None:
        for _ in range(600):
            containers.start_warming()
            if containers.warm_for(key) >= count:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"no warm container for {key}")

    async def bash(name: str, code: str) -> str:
        result = await containers.exec(name, ["bash", "-c", code], workdir=containers.spec.workdir)
        assert result.ok, result.stderr
        return result.stdout.strip()

    async def run() -> None:
        containers.pool = ContainerPool(4, warm=3)
        try:
            await wait_warm(BLANK, 3)  # no ask yet: blank ones
            cold = await containers.admit("x", first)  # a blank one, set up on first use
            assert cold is not None and not containers.is_ready(cold)
            await Workspace(containers, cold, first).ensure()
            await wait_warm(one, 2)  # x asked for the first task: its tree is prepared ahead
            handed = await containers.admit("x", first)
            assert handed is not None and containers.is_ready(handed)  # nothing left to do
            assert handed != cold
            assert await bash(handed, "git log --format=%s; git status --short | wc -l") == "base\n0"
            assert await bash(handed, "git rev-parse HEAD") == await bash(cold, "git rev-parse HEAD")
            await bash(handed, "echo secret > mine.txt")
            other = await containers.admit("y", second)  # another task: never the first's tree
            assert other is not None and other != handed
            await Workspace(containers, other, second).ensure()
            assert await bash(other, "git rev-parse HEAD") != await bash(handed, "git rev-parse HEAD")
            again = await containers.admit("x", first)
            assert again is not None and again not in (cold, handed, other)
            await Workspace(containers, again, first).ensure()
            assert (await bash(again, "ls mine.txt 2>&1 || true")).endswith("No such file or directory")
            await containers.remove(handed)  # the session's end removes its container
            assert handed not in await containers.live()
            taken = {cold, handed, other, again}
            for queue in containers._warm.values():
                assert not taken & set(queue)  # none of them is warm again
            report = containers.report()
            assert report["warm_hits"] >= 2 and report["warm_misses"] >= 1
        finally:
            containers.pool = None
            await containers.aclose()
        assert not await containers.live()

    asyncio.run(run())
