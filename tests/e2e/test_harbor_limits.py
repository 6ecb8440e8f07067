"""A Harbor task's own limits on a real engine: task directories written here in the public
format, each with its own ``task.toml``, served by the same spec shape as the fixture.

* ``[environment]`` cpus and memory (``memory_mb``, or Harbor's older ``memory = "300M"``) are
  the container's cgroup limits, read inside it;
* ``[agent] timeout_sec`` is the episode's time limit: a call running at it is cut short, and
  the next call ends the episode, graded as it stands (Harbor stops the agent, then verifies);
* ``[verifier] timeout_sec`` is the test run's deadline: past it the grade is void (Harbor's
  ``VerifierTimeoutError`` has no valid reward);
* a task that asks for more than the operator allows (``$ENVBUILDER_MAX_*``) gets the maximum.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.inprocess import LocalEpisode
from envbuilder.protocol import ToolOutput
from tests.sandboxes import needs_base_image

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"
MIB = 1024 * 1024

# Reads the container's own cgroup (v1 or v2): "<memory bytes> <cpu quota> <cpu period>".
V2 = "echo $(cat /sys/fs/cgroup/memory.max) $(cat /sys/fs/cgroup/cpu.max)"
V1 = (
    "echo $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    " $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
)
CGROUP = f"if [ -f /sys/fs/cgroup/memory.max ]; then {V2}; else {V1}; fi"

REWARD = "/logs/verifier/reward.txt"
PASSES_WITH_DONE = f"#!/bin/bash\nif [ -f /app/done ]; then echo 1 > {REWARD}; else echo 0 > {REWARD}; fi\n"
NEVER_ENDS = "#!/bin/bash\nsleep 60\necho 1 > /logs/verifier/reward.txt\n"

TASKS = {
    "a-roomy": (
        '[environment]\ncpus = 0.5\nmemory = "300M"\n\n[agent]\ntimeout_sec = 20\n',
        PASSES_WITH_DONE,
    ),
    "b-slow-tests": ("[verifier]\ntimeout_sec = 2\n\n[environment]\nmemory_mb = 256\n", NEVER_ENDS),
    "c-greedy": (
        "[verifier]\ntimeout_sec = 600\n\n[environment]\ncpus = 64\nmemory_mb = 1048576\n",
        NEVER_ENDS,
    ),
}
ROOMY, SLOW, GREEDY = 0, 1, 2


def _write_tasks(folder: Path) -> Path:
    shutil.copy(FIXTURE / "harbor.yaml", folder / "harbor.yaml")
    for name, (toml, test) in TASKS.items():
        task = folder / "tasks" / name
        # The fixture's hello-file image (the same build context: built once per content).
        shutil.copytree(FIXTURE / "tasks/hello-file/environment", task / "environment")
        (task / "tests").mkdir()
        (task / "tests/test.sh").write_text(test)
        (task / "solution").mkdir()
        (task / "solution/solve.sh").write_text("#!/bin/bash\ntouch /app/done\n")
        (task / "instruction.md").write_text("Create the file /app/done.\n")
        (task / "task.toml").write_text(f'schema_version = "1.4"\n\n[task]\nname = "{name}"\n\n{toml}')
    return folder / "harbor.yaml"


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs_base_image()
    return _write_tasks(tmp_path_factory.mktemp("harbor-limits"))


def _episode(env: Environment, index: int) -> LocalEpisode:
    task = env.split("test").task(index)
    assert env.containers is not None
    asyncio.run(env.containers.image(task))  # the image first (built once per content)
    return LocalEpisode(env, task)


def _text(out: object) -> str:
    assert isinstance(out, ToolOutput), out
    return "\n".join(getattr(b, "text", "") for b in out.blocks)


def _cgroup(episode: LocalEpisode) -> tuple[int, int, int]:
    memory, quota, period = _text(episode.call("bash", {"code": CGROUP})).split()
    return int(memory), int(quota), int(period)


def test_the_task_s_cpus_and_memory_are_its_container_s_cgroup(spec: Path) -> None:
    env = load_environment(spec)
    episode = _episode(env, ROOMY)
    try:
        memory, quota, period = _cgroup(episode)
        assert memory == 300 * MIB  # memory = "300M", as Harbor reads it
        assert quota / period == 0.5
    finally:
        episode.end()
    episode = _episode(env, SLOW)
    try:
        memory, quota, period = _cgroup(episode)
        assert memory == 256 * MIB
        assert quota / period == 1.0  # no cpus given: the spec's
    finally:
        episode.end()


def test_the_agent_s_time_limit_ends_the_episode_graded_as_it_stands(spec: Path) -> None:
    env = load_environment(spec)
    episode = _episode(env, ROOMY)
    try:
        assert not episode.call("bash", {"code": "touch /app/done"}).finished  # type: ignore[union-attr]
        cut = episode.call("bash", {"code": "sleep 60; echo slept"})
        assert isinstance(cut, ToolOutput) and not cut.finished and "slept" not in _text(cut)
        late = episode.call("bash", {"code": "rm /app/done"})  # past the limit: not run
        assert isinstance(late, ToolOutput)
        assert (late.finished, late.reward, late.metadata["time_limit"]) == (True, 1.0, 20.0)
        assert _text(late).startswith("[The episode's time limit of 20 s has passed")
        assert episode.reward == 1.0 and sum(r or 0 for r in episode.rewards) == 1.0
    finally:
        episode.end()


def test_tests_past_the_verifier_s_deadline_are_void(spec: Path) -> None:
    env = load_environment(spec)
    episode = _episode(env, SLOW)
    try:
        out = episode.call("submit", {"answer": ""})
        assert isinstance(out, ToolOutput) and out.finished and out.reward is None
        assert out.metadata["void"] == "the tests ran past their time limit"
        assert episode.void == "the tests ran past their time limit"
    finally:
        episode.end()


def test_a_task_gets_no_more_than_the_operator_allows(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_MAX_CPUS", "1")
    monkeypatch.setenv("ENVBUILDER_MAX_MEMORY_MB", "200")
    monkeypatch.setenv("ENVBUILDER_MAX_VERIFIER_SECONDS", "2")
    env = load_environment(spec)
    episode = _episode(env, GREEDY)
    try:
        memory, quota, period = _cgroup(episode)
        assert (memory, quota / period) == (200 * MIB, 1.0)  # asked: 1 TiB and 64 CPUs
        out = episode.call("submit", {"answer": ""})  # asked 600 s for a test that never ends
        assert isinstance(out, ToolOutput) and out.reward is None
        assert out.metadata["void"] == "the tests ran past their time limit"
    finally:
        episode.end()
