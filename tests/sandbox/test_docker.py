"""The Docker/Podman backend without an engine: its command line, and a missing or unreachable
engine is a SandboxError (so graders report ungradeable). No engine runs in CI: the runs
themselves are not exercised here."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.graders import Outcome
from envbuilder.sandbox import DockerBackend, Limits
from envbuilder.sandbox._docker import _BOOTSTRAP, _tar
from tests.graders._util import grade, make

LIMITS = Limits(wall_seconds=5, cpu_seconds=3.5, memory_mb=256, processes=8, output_kb=4, disk_mb=2)


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI")
def test_command_line_locks_the_container_down() -> None:
    argv = DockerBackend(image="python:3.12-slim").argv("envbuilder-x", ["python3", "main.py"], LIMITS)
    assert argv[:7] == [shutil.which("docker"), "run", "--rm", "-i", "--name", "envbuilder-x", "--network"]
    joined = " ".join(argv)
    for part in (
        "--network none",
        "--read-only",
        "--tmpfs /work:rw,exec,size=2m,mode=1777",
        "--tmpfs /tmp:rw,size=2m,mode=1777",
        "--user 65534:65534",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--memory 256m --memory-swap 256m",
        "--pids-limit 8",
        "--ulimit cpu=4:5",
        "--ulimit fsize=2097152",
        "--env HOME=/work",
    ):
        assert part in joined, part
    assert argv[-6:] == ["sh", "python:3.12-slim", "-c", _BOOTSTRAP, "python3", "main.py"]
    mounted = DockerBackend().argv("n", ["true"], LIMITS, workdir=Path("/srv/session-1"))
    assert "/srv/session-1:/work:rw" in mounted and not any(a.startswith("/work:") for a in mounted)


def test_files_travel_as_a_tar_readable_by_the_run_user() -> None:
    with tarfile.open(fileobj=io.BytesIO(_tar({"main.py": b"print(1)\n"}))) as tar:
        (info,) = tar.getmembers()
        assert (info.name, info.mode, tar.extractfile(info).read()) == ("main.py", 0o644, b"print(1)\n")


async def test_a_missing_cli_is_a_sandbox_error() -> None:
    with pytest.raises(SandboxError, match="needs the `no-such-docker` CLI"):
        await DockerBackend(cli="no-such-docker").run(["true"], {}, LIMITS)


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI")
async def test_an_unreachable_engine_is_a_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    with pytest.raises(SandboxError, match="the container engine could not run the sandbox"):
        await DockerBackend().run(["python3", "main.py"], {"main.py": b"print(1)"}, LIMITS)


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI")
async def test_the_grader_says_ungradeable_when_the_engine_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    grader = make({"type": "unit_tests", "program": "{{ answer }}", "backend": "docker"})
    result = await grade(grader, "print(1)", {})
    assert result.outcome is Outcome.UNGRADEABLE and result.score is None
    assert "the sandbox could not run the code" in result.reason
