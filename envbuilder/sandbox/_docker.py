"""The container backend: the same contract on a Docker (or Podman) engine, through its CLI.

Point it at an engine the way the CLI is pointed: ``DOCKER_HOST`` (``unix:///run/user/1000/
podman/podman.sock``, ``ssh://user@host``, ``tcp://host:2376`` with ``DOCKER_TLS_VERIFY``)
or ``DOCKER_CONTEXT``; ``ENVBUILDER_SANDBOX_DOCKER=podman`` uses the ``podman`` CLI instead.
The image (``ENVBUILDER_SANDBOX_IMAGE``, default ``python:3.11-slim``) must hold the
language's command and ``sh`` and ``tar``.

Each run is ``docker run --rm -i`` of a fresh container: no network, a read-only root, tmpfs
``/work`` and ``/tmp`` of the disk size, an unprivileged user, every capability dropped, no
new privileges, memory and swap capped, a PID limit and rlimits for CPU time, file size and
open files. The files travel as a tar archive on stdin, unpacked into ``/work`` before the
command starts. On a timeout the container is killed by name (killing the client would
leave it running). An engine that is missing or refuses the run (``docker run`` exits 125)
is a :class:`~envbuilder.errors.SandboxError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import tarfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from envbuilder.errors import SandboxError
from envbuilder.sandbox._backend import BASE_ENV, Backend
from envbuilder.sandbox._process import run_process
from envbuilder.sandbox._result import Limits, RunResult

CLI_ENV = "ENVBUILDER_SANDBOX_DOCKER"
IMAGE_ENV = "ENVBUILDER_SANDBOX_IMAGE"
DEFAULT_IMAGE = "python:3.11-slim"
#: What the docker CLI may read from the server's environment (where the engine is, its TLS).
CLIENT_ENV = (
    "PATH",
    "HOME",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "XDG_RUNTIME_DIR",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
)
_ENGINE_FAILED = 125  # `docker run` itself failed: no engine, no image, refused options
# Unpack the files, run the command; its own status 125 is shown as 1 so that 125 always means
# the engine failed (the code cannot pass itself off as an engine failure).
_BOOTSTRAP = 'tar -x -f - -C /work || exit 124; "$0" "$@"; s=$?; [ "$s" -eq 125 ] && s=1; exit "$s"'


class DockerBackend(Backend):
    """Runs each command in a fresh, locked-down container."""

    name = "docker"

    def __init__(self, *, cli: str | None = None, image: str | None = None, user: str = "65534:65534"):
        self.cli = cli or os.environ.get(CLI_ENV) or "docker"
        self.image = image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
        self.user = user

    def describe(self) -> str:
        where = os.environ.get("DOCKER_HOST") or os.environ.get("DOCKER_CONTEXT") or "the default engine"
        return f"{self.cli} ({self.image} on {where}; no network, read-only root)"

    def argv(
        self, name: str, command: Sequence[str], limits: Limits, workdir: Path | None = None
    ) -> list[str]:
        """The ``docker run`` command line for one run in a container called ``name``."""
        cli = shutil.which(self.cli)
        if cli is None:
            raise SandboxError(
                f"the docker sandbox needs the `{self.cli}` CLI, which is not installed",
                hint=f"Install Docker or Podman, or set {CLI_ENV}",
            )
        disk = f"{limits.disk_mb}m"
        memory = f"{limits.memory_mb}m"
        out = [cli, "run", "--rm", "-i", "--name", name, "--network", "none", "--read-only"]
        if workdir is None:
            out += ["--tmpfs", f"/work:rw,exec,size={disk},mode=1777"]
        else:
            out += ["--volume", f"{workdir}:/work:rw"]
        out += ["--tmpfs", f"/tmp:rw,size={disk},mode=1777", "--workdir", "/work"]
        out += ["--user", self.user, "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        out += ["--memory", memory, "--memory-swap", memory, "--pids-limit", str(limits.processes)]
        out += [
            "--ulimit",
            f"cpu={limits.cpu_rlimit}:{limits.cpu_rlimit + 1}",
            "--ulimit",
            f"fsize={limits.disk_mb * 1024 * 1024}",
            "--ulimit",
            "nofile=256:256",
            "--ulimit",
            "core=0",
        ]
        for key, value in BASE_ENV.items():
            out += ["--env", f"{key}={value}"]
        out += ["--entrypoint", "sh", self.image, "-c", _BOOTSTRAP, *command]
        return out

    async def _run(
        self, command: Sequence[str], files: Mapping[str, bytes], limits: Limits, workdir: Path | None
    ) -> RunResult:
        name = f"envbuilder-{uuid.uuid4().hex[:16]}"
        argv = self.argv(name, command, limits, workdir)

        async def kill() -> None:
            proc = await asyncio.create_subprocess_exec(
                argv[0],
                "kill",
                name,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=_client_env(),
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout=30)

        try:
            result, launcher = await run_process(
                argv, limits, stdin=_tar(files), on_kill=kill, env=_client_env()
            )
        except OSError as exc:
            raise SandboxError(f"the {self.cli} CLI could not be started: {exc}") from None
        if launcher == _ENGINE_FAILED:
            first = result.stderr.strip().splitlines()[:1]
            raise SandboxError(
                f"the container engine could not run the sandbox: {first[0][:300] if first else 'exit 125'}",
                hint="Check that the engine runs and that DOCKER_HOST points at it",
            )
        return result


def _client_env() -> dict[str, str]:
    return {k: os.environ[k] for k in CLIENT_ENV if k in os.environ}


def _tar(files: Mapping[str, bytes]) -> bytes:
    """The files as an uncompressed tar archive (readable by everyone: the run's user is not ours)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
