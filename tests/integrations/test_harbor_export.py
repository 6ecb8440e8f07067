"""``envbuilder export harbor``: a spec's tasks as Harbor task directories that Harbor's own
loader reads, and a Harbor folder that goes through envbuilder and back unchanged in meaning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envbuilder.data._harbor import strip_canary
from envbuilder.environment import load_environment
from envbuilder.errors import DataError
from envbuilder.integrations import export_harbor
from tests.sandboxes import needs_base_image

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "harbor"
HARBOR_PYTHON = os.environ.get("ENVBUILDER_HARBOR_PYTHON")
"""A Python (3.12 or later) with the real ``harbor`` installed; its test skips without one."""


def _files(folder: Path) -> dict[str, tuple[bytes, bool]]:
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), bool(p.stat().st_mode & 0o111))
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_harbor_folder_goes_through_envbuilder_and_back_unchanged(tmp_path: Path) -> None:
    info = export_harbor(FIXTURES / "harbor.yaml", tmp_path / "out")
    assert (info.kind, info.tasks) == ("harbor_tests", ["fix-wordcount", "hello-file"])
    for name in info.tasks:
        original, back = FIXTURES / "tasks" / name, tmp_path / "out" / name
        for part in ("environment", "tests", "solution"):
            assert _files(back / part) == _files(original / part), (name, part)
        assert (back / "task.toml").read_text() == (original / "task.toml").read_text()
        # The instruction as Harbor shows it (the canary is not part of it, nor written back).
        assert (back / "instruction.md").read_text() == strip_canary(
            (original / "instruction.md").read_text()
        )
    # ... and read again, the tasks are the same rows.
    shutil.copy(FIXTURES / "harbor.yaml", tmp_path / "harbor.yaml")
    spec = tmp_path / "harbor.yaml"
    spec.write_text(spec.read_text().replace("test: tasks", "test: out"))
    first, again = (
        load_environment(FIXTURES / "harbor.yaml").split("test"),
        load_environment(spec).split("test"),
    )
    for index in range(2):
        a, b = first.task(index), again.task(index)
        assert {k: v for k, v in a.items() if k != "environment"} == {
            k: v for k, v in b.items() if k != "environment"
        }


def test_humaneval_exports_its_program_tests_and_gold(tmp_path: Path) -> None:
    info = export_harbor(ROOT / "envs" / "humaneval.yaml", tmp_path / "he", limit=2)
    assert (info.kind, info.tasks) == ("unit_tests", ["humaneval-0", "humaneval-1"])
    task = tmp_path / "he" / "humaneval-0"
    program = json.loads((task / "tests" / "program.json").read_text())
    assert program["entry_point"] == "has_close_elements" and program["call"] == "check(has_close_elements)"
    assert program["head"].startswith("from typing import List") and program["tail"] == ""
    assert "def check(candidate)" in program["tests"]
    assert "/app/solution.py" in (task / "instruction.md").read_text()
    assert "return False" in (task / "solution" / "solve.sh").read_text()
    assert (task / "environment" / "Dockerfile").read_text() == "FROM python:3.12-slim\n\nWORKDIR /app\n"


def test_swe_tomli_exports_the_repository_the_test_patch_and_the_gold_patch(tmp_path: Path) -> None:
    env = load_environment(ROOT / "envs" / "swe_tomli.yaml")
    row = env.split("test").task(0)
    info = export_harbor(ROOT / "envs" / "swe_tomli.yaml", tmp_path / "swe", limit=1)
    task = tmp_path / "swe" / info.tasks[0]
    assert info.tasks == [row["instance_id"]]
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith((ROOT / "envs/data/tomli/image/Dockerfile").read_text().rstrip("\n"))
    assert "COPY repo.tar /tmp/repo.tar" in dockerfile and dockerfile.endswith("WORKDIR /testbed\n")
    assert (task / "tests" / "test.patch").read_text() == row["test_patch"]
    test_sh = (task / "tests" / "test.sh").read_text()
    assert all(t in test_sh for t in [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]])
    assert (task / "solution" / "gold.patch").read_text().strip() == row["patch"].strip()


def test_a_spec_s_limits_go_out_as_task_toml_and_come_back_as_the_task_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox's cpus, memory, storage and time limit are written as Harbor's
    `[environment]` and `[agent]` keys, and a `harbor` dataset reads them back as the task's
    own limits."""
    spec = tmp_path / "limited.yaml"
    (tmp_path / "data").symlink_to(ROOT / "envs" / "data")  # (the base's files, found from here)
    monkeypatch.setenv("ENVBUILDER_REPOSITORIES", str(ROOT / "envs" / "data"))
    spec.write_text(
        f"extends: {ROOT / 'envs' / 'swe_tomli.yaml'}\n"
        "sandbox:\n  cpus: 1.5\n  memory_mb: 3072\n  storage_mb: 4096\n  time_limit: 900\n"
    )
    info = export_harbor(spec, tmp_path / "out" / "tasks", limit=1)
    config = tomllib.loads((info.path / info.tasks[0] / "task.toml").read_text())
    assert config["environment"] == {
        "network_mode": "no-network",
        "cpus": 1.5,
        "memory_mb": 3072,
        "storage_mb": 4096,
    }
    assert config["agent"] == {"timeout_sec": 900.0}
    if HARBOR_PYTHON:  # Harbor's own loader reads the same limits (its warnings are failures)
        done = subprocess.run(
            [HARBOR_PYTHON, str(ROOT / "tests" / "harbor_loader.py"), str(info.path / info.tasks[0])],
            capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        read = json.loads(done.stdout)["config"]
        assert (read["agent"]["timeout_sec"], read["environment"]["cpus"]) == (900.0, 1.5)
        assert (read["environment"]["memory_mb"], read["environment"]["storage_mb"]) == (3072, 4096)
    shutil.copy(FIXTURES / "harbor.yaml", tmp_path / "out" / "harbor.yaml")
    back = load_environment(tmp_path / "out" / "harbor.yaml").split("test").task(0)
    assert json.loads(back["limits"]) == {
        "cpus": 1.5,
        "memory_mb": 3072,
        "storage_mb": 4096,
        "agent_timeout_sec": 900.0,
    }


def test_a_grader_harbor_tests_cannot_express_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        export_harbor(ROOT / "envs" / "gsm8k.yaml", tmp_path / "g")
    assert caught.value.code == "export_unsupported" and "'exact_match'" in caught.value.message
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(DataError) as caught:
        export_harbor(FIXTURES / "harbor.yaml", tmp_path / "full")
    assert caught.value.code == "export_exists"


@pytest.mark.skipif(
    not HARBOR_PYTHON,
    reason="harbor needs a Python 3.12 with harbor (its own fastmcp pin): set ENVBUILDER_HARBOR_PYTHON "
    "(.ci/run does where the machine has a Python 3.12)",
)
def test_harbors_own_loader_reads_the_exports(tmp_path: Path) -> None:
    folders = []
    for spec, limit in (("tests/fixtures/harbor/harbor.yaml", None), ("envs/humaneval.yaml", 3)):
        info = export_harbor(ROOT / spec, tmp_path / Path(spec).stem, limit=limit)
        folders += [info.path / name for name in info.tasks]
    info = export_harbor(ROOT / "envs" / "swe_tomli.yaml", tmp_path / "swe", limit=1)
    folders += [info.path / name for name in info.tasks]
    assert HARBOR_PYTHON is not None
    done = subprocess.run(
        [HARBOR_PYTHON, str(ROOT / "tests" / "harbor_loader.py"), *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["folder"] for r in read] == [str(f) for f in folders]
    for record, folder in zip(read, folders, strict=True):
        assert record["valid"] and record["name"] == folder.name
        assert record["instruction"] == (folder / "instruction.md").read_text()
        assert (record["test"], record["solve"]) == ("tests/test.sh", "solution/solve.sh")
    hello = next(r for r in read if r["name"] == "hello-file")
    assert (
        hello["config"]["verifier"]["timeout_sec"] == 60.0
        and hello["config"]["agent"]["timeout_sec"] == 120.0
    )
    humaneval = next(r for r in read if r["name"] == "humaneval-0")
    assert humaneval["config"]["metadata"] == {
        "envbuilder_spec": "humaneval",
        "envbuilder_split": "test",
        "envbuilder_index": 0,
        "envbuilder_task": "humaneval-0",
    }
    assert humaneval["config"]["environment"]["network_mode"] == "no-network"


def test_an_exported_humaneval_task_is_served_and_checked_as_a_harbor_task(tmp_path: Path) -> None:
    """The export read back as a `harbor` dataset: its image built from the exported Dockerfile
    (python:3.12-slim read as the local base), the oracle earns 1, no work earns 0."""
    needs_base_image()
    export_harbor(ROOT / "envs" / "humaneval.yaml", tmp_path / "tasks", limit=1)
    shutil.copy(FIXTURES / "harbor.yaml", tmp_path / "harbor.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder", "check", str(tmp_path / "harbor.yaml")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gold answers: 1/1 get full reward" in done.stdout
    assert "empty solutions: 1/1 get no reward" in done.stdout
