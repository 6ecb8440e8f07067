"""`type: harbor`: a folder of Harbor task directories (the public format: instruction.md,
task.toml, environment/Dockerfile, tests/test.sh, solution/solve.sh) read as a spec's tasks."""

from __future__ import annotations

import base64
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from envbuilder.environment import load_environment
from envbuilder.errors import SpecError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"


def _names(data: str) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def test_each_task_directory_is_a_row_with_its_parts() -> None:
    env = load_environment(FIXTURES / "harbor.yaml")
    view = env.split("test")
    assert len(view) == 2
    hello = view.task(1)
    assert hello["id"] == "hello-file"
    # The canary line and the blank line after it are stripped, as Harbor shows the instruction.
    assert hello["instruction"].startswith("Create a file `/app/hello.txt`")
    assert "canary" not in hello["instruction"]
    assert hello["environment"] == "tasks/hello-file/environment"
    assert set(_names(hello["tests"])) == {"test.sh"}
    assert json.loads(hello["verifier"]) == {"timeout_sec": 60.0, "user": 0, "env": {}}
    assert hello["agent_timeout_sec"] == 120.0
    assert json.loads(hello["limits"]) == {"cpus": 1, "memory_mb": 512, "agent_timeout_sec": 120.0}
    (oracle,) = json.loads(hello["oracle"])
    assert oracle == {
        "name": "bash",
        "arguments": {"code": (FIXTURES / "tasks/hello-file/solution/solve.sh").read_text()},
    }
    fix = view.task(0)
    assert set(_names(fix["tests"])) == {"test.sh", "test_outputs.py"}
    # A solution with more files than solve.sh is unpacked beside it, then run.
    code = json.loads(fix["oracle"])[0]["arguments"]["code"]
    assert code.startswith("d=$(mktemp -d) && echo ") and code.endswith('bash "$d/solve.sh"')
    assert set(_names(fix["solution"])) == {"solve.sh", "fix.py"}


def test_the_prompt_shows_the_instruction_and_nothing_of_the_solution() -> None:
    env = load_environment(FIXTURES / "harbor.yaml")
    task = env.split("test").task(1)
    text = env.prompt(task)[0].text  # type: ignore[union-attr]
    assert text.startswith("Create a file `/app/hello.txt`")
    assert "Hello, Harbor!' >" not in text and "reward" not in text


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "h")
    return tmp_path / "h"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / "tasks/hello-file/tests/test.sh").unlink(), "hello-file: no tests/test.sh"),
        (lambda d: (d / "tasks/hello-file/environment/Dockerfile").unlink(), "no environment/Dockerfile"),
        (lambda d: (d / "tasks/hello-file/task.toml").write_text("[verifier\n"), "task.toml: not valid TOML"),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text('[verifier]\ntimeout_sec = "soon"\n'),
            "[verifier].timeout_sec: expected a positive number of seconds, got 'soon'",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text('[verifier]\nuser = "alice"\n'),
            "[verifier].user: 'alice' is not a uid",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text('[[steps]]\nname = "one"\n'),
            "a multi-step task ([[steps]]) cannot be read",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text("[environment]\ncpus = -2\n"),
            "hello-file/task.toml: [environment].cpus: expected a positive number of CPUs, got -2",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text('[environment]\nmemory = "lots"\n'),
            "[environment].memory: expected a size such as '2G' or '512M', got 'lots'",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text("[environment]\nmemory_mb = 1.5\n"),
            "[environment].memory_mb: expected a positive whole number of MB, got 1.5",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text(
                '[environment]\nmemory = "1G"\nmemory_mb = 512\n'
            ),
            "[environment].memory: '1G' (1024 MB) disagrees with memory_mb = 512",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text('[environment]\nstorage = "10T"\n'),
            "[environment].storage: expected a size such as '2G' or '512M', got '10T'",
        ),
        (
            lambda d: (d / "tasks/hello-file/task.toml").write_text("[agent]\ntimeout_sec = 0\n"),
            "[agent].timeout_sec: expected a positive number of seconds, got 0",
        ),
    ],
)
def test_a_broken_task_directory_is_named_with_what_is_wrong(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    folder = _copy(tmp_path)
    change(folder)
    with pytest.raises(SpecError) as caught:
        load_environment(folder / "harbor.yaml")
    assert message in str(caught.value)


def test_a_missing_folder_is_located_at_its_key(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    spec = folder / "harbor.yaml"
    spec.write_text(spec.read_text().replace("test: tasks", "test: nowhere"))
    with pytest.raises(SpecError) as caught:
        load_environment(spec)
    assert "dataset.folders.test" in str(caught.value) and "is not a folder" in str(caught.value)


def test_harbor_sizes_are_read_as_harbor_reads_them(tmp_path: Path) -> None:
    """`memory`/`storage` (Harbor's older keys) in G, M or K, beside the `_mb` keys Harbor now
    writes; only the values a task gives are in its limits."""
    folder = _copy(tmp_path)
    (folder / "tasks/hello-file/task.toml").write_text(
        '[environment]\ncpus = 0.5\nmemory = "1.5G"\nstorage = "2048M"\n\n[agent]\ntimeout_sec = 30\n'
    )
    (folder / "tasks/fix-wordcount/task.toml").write_text("[verifier]\ntimeout_sec = 5\n")
    view = load_environment(folder / "harbor.yaml").split("test")
    assert json.loads(view.task(1)["limits"]) == {
        "cpus": 0.5,
        "memory_mb": 1536,
        "storage_mb": 2048,
        "agent_timeout_sec": 30.0,
    }
    assert json.loads(view.task(0)["limits"]) == {}
