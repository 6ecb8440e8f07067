"""A task's own limits: read from its limits field, the spec's where it gives none, and lowered
to the operator's maxima (``$ENVBUILDER_MAX_*``)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import (
    ContainerPool,
    EffectiveLimits,
    Maxima,
    SessionContainers,
    check_limits,
    task_limits,
)
from envbuilder.spec import ContainerSpec
from tests.sandboxes import BASE_IMAGE, needs_base_image

SPEC = ContainerSpec(image="x", memory_mb=512, cpus=1.0, limits_field="limits")
ROOMY = Maxima(cpus=8, memory_mb=16_384, storage_mb=65_536, agent_timeout_sec=3600, verifier_timeout_sec=600)


def test_a_task_s_own_values_replace_the_spec_s() -> None:
    task = {"limits": '{"cpus": 2, "memory_mb": 2048, "agent_timeout_sec": 90}'}
    assert task_limits(SPEC, task, ROOMY) == EffectiveLimits(
        cpus=2.0, memory_mb=2048, storage_mb=None, time_limit=90.0
    )
    # None, an empty field, or a key left out: the spec's own value.
    for empty in ({}, {"limits": ""}, {"limits": "{}"}, {"limits": '{"cpus": null}'}):
        assert task_limits(SPEC, empty, ROOMY) == EffectiveLimits(1.0, 512, None, None)
    # Without `limits_field`, a task's field is not read.
    plain = SPEC.model_copy(update={"limits_field": None, "time_limit": 60.0, "storage_mb": 1024})
    assert task_limits(plain, task, ROOMY) == EffectiveLimits(1.0, 512, 1024, 60.0)


def test_a_task_cannot_take_more_than_the_operator_allows() -> None:
    greedy = {"limits": '{"cpus": 64, "memory_mb": 1048576, "storage_mb": 1e9, "agent_timeout_sec": 1e9}'}
    limits = task_limits(SPEC, greedy, ROOMY)
    assert (limits.cpus, limits.memory_mb, limits.storage_mb, limits.time_limit) == (8, 16_384, 65_536, 3600)
    assert limits.lowered == ("cpus", "memory_mb", "storage_mb", "agent_timeout_sec")


def test_the_operator_s_maxima_come_from_the_environment() -> None:
    maxima = Maxima.from_env({"ENVBUILDER_MAX_CPUS": "0.5", "ENVBUILDER_MAX_VERIFIER_SECONDS": "30"})
    assert (maxima.cpus, maxima.verifier_timeout_sec, maxima.agent_timeout_sec) == (0.5, 30.0, 86_400.0)
    assert maxima.memory_mb > 0 and maxima.storage_mb == 65_536
    with pytest.raises(SandboxError) as caught:
        Maxima.from_env({"ENVBUILDER_MAX_MEMORY_MB": "lots"})
    assert caught.value.message == "$ENVBUILDER_MAX_MEMORY_MB: expected a positive number, got 'lots'"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[1]", "expected an object of cpus, memory_mb, storage_mb, agent_timeout_sec, got [1]"),
        ('{"gpus": 1}', "unknown key 'gpus' (expected cpus, memory_mb, storage_mb, agent_timeout_sec)"),
        ('{"cpus": -1}', "cpus: expected a positive number, got -1"),
        ('{"memory_mb": "1G"}', "memory_mb: expected a positive number, got '1G'"),
        ('{"cpus": true}', "cpus: expected a positive number, got True"),
        ("{", "not JSON: '{'"),
    ],
)
def test_bad_limits_are_named(value: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_limits(value)
    assert str(caught.value) == message
    with pytest.raises(SandboxError) as refused:
        task_limits(SPEC, {"limits": value}, ROOMY)
    assert refused.value.message == f"the task's `limits` is not limits: {message}"


def test_a_warm_container_gets_the_task_s_own_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm container is made with the spec's limits before any task is known; the session
    that takes it gets its task's own cpus and memory (the engine's update), as its cgroup shows."""
    needs_base_image()
    monkeypatch.setenv("ENVBUILDER_SERVER_ID", f"test-{uuid.uuid4().hex[:8]}")
    spec = ContainerSpec(image=BASE_IMAGE, workdir="/app", memory_mb=512, cpus=1.0, limits_field="limits")
    containers = SessionContainers(spec, Path("."))
    task = {"limits": '{"memory_mb": 300, "cpus": 0.5}'}
    memory = "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"

    async def run() -> tuple[str, str]:
        containers.pool = ContainerPool(warm=1)
        try:
            containers.start_warming()
            while containers.warm < 1:
                await asyncio.sleep(0.1)
            name = containers.take_name()
            before = await containers.exec(name, ["sh", "-c", memory])
            await containers.ensure(name, None, task)
            after = await containers.exec(name, ["sh", "-c", memory])
            return before.stdout.strip(), after.stdout.strip()
        finally:
            containers.pool = None
            await containers.aclose()

    before, after = asyncio.run(run())
    assert (int(before), int(after)) == (512 * 1024 * 1024, 300 * 1024 * 1024)
