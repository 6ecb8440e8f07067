"""``envbuilder serve`` as a real subprocess (several workers, replicas), stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.servers import free_port

READY_SECONDS = 600.0
"""How long a server may take to answer /health: generous, for a loaded machine (two cores, load
8 took more than 60 s); a server that exits fails at once, so the wait costs nothing then."""


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = READY_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"envbuilder serve exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=10).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError("envbuilder serve did not become healthy")


@contextlib.contextmanager
def serve_process(
    *args: str,
    env: dict[str, str] | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    ready_timeout: float = READY_SECONDS,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``envbuilder serve ARGS --port P`` on 127.0.0.1 (``env``: variables added to ours;
    ``stdout``, ``stderr``: files for its output; ``ready_timeout``: seconds it may take to
    answer /health); yield its URL and process."""
    port = free_port()
    with contextlib.ExitStack() as files:
        out = files.enter_context(stdout.open("wb")) if stdout else subprocess.DEVNULL
        err = files.enter_context(stderr.open("wb")) if stderr else None
        process = subprocess.Popen(
            [sys.executable, "-m", "envbuilder", "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=err,
            start_new_session=True,  # its workers form one group, stopped together below
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, ready_timeout)
        yield url, process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
