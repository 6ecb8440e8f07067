"""The sandbox backends the sandbox tests run on, each for real: bubblewrap, the Docker engine
(``DOCKER_HOST``, else the local socket), and Podman (its Docker-compatible API service started
here, on a socket in a temporary folder, for the test session).

A container backend needs its engine and the sandbox image in it (``envbuilder sandbox
build-image``, which ``.ci/run`` runs for both engines). Without them a test skips with the
reason locally, and fails under CI (``CI`` set), where both are installed and built.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import Backend, BubblewrapBackend, DockerBackend
from envbuilder.isolation.sandbox._engine import DEFAULT_HOST, Engine, EngineAddress
from tests.servers import free_port

BACKENDS = ("bubblewrap", "docker", "podman")
"""Every backend the sandbox tests are parametrized over (``podman`` is the Docker backend on
Podman's engine)."""

_podman: dict[str, str] = {}
_checked: dict[str, str | None] = {}


def engine_host(name: str) -> str:
    """The engine address the ``docker`` or ``podman`` backend uses (skips when it has none)."""
    if name == "podman":
        host = _podman.get("host") or _start_podman()
    else:
        host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    problem = _checked.get(host, "")
    if problem == "":
        problem = _checked[host] = _engine_problem(host)
    if problem:
        _skip(f"needs a container engine for the {name} sandbox: {problem}")
    return host


def make_backend(name: str) -> Backend:
    """The backend called ``name`` in :data:`BACKENDS` (skips when it cannot run here)."""
    if name == "bubblewrap":
        return BubblewrapBackend()
    return DockerBackend(host=engine_host(name))


@contextlib.contextmanager
def configured(name: str) -> Iterator[None]:
    """The process's environment set so that specs without a ``backend:`` (and servers) use
    backend ``name`` (``ENVBUILDER_SANDBOX``, ``DOCKER_HOST``); restored after."""
    values = {"ENVBUILDER_SANDBOX": "bubblewrap" if name == "bubblewrap" else "docker"}
    if name != "bubblewrap":
        values["DOCKER_HOST"] = engine_host(name)
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _skip(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs the engines and builds the image: .ci/run)")
    pytest.skip(reason)


def _engine_problem(host: str) -> str | None:
    """Why no run can go to the engine at ``host`` (None when it can)."""

    async def probe() -> str | None:
        backend = DockerBackend(host=host)
        async with Engine(EngineAddress.from_env(host)).connect() as api:
            await api.version()
            if await api.image(backend.image) is None:
                return f"the engine at {host} has no image {backend.image} (envbuilder sandbox build-image)"
        return None

    def run() -> str | None:  # in a thread of its own: an async test's loop may be running
        try:
            return asyncio.run(probe())
        except SandboxError as exc:
            return str(exc)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def podman_over_tcp() -> str:
    """A Podman engine at ``tcp://127.0.0.1:<port>``: an engine reached over the network, as a
    remote one is (its images are the local Podman's)."""
    if "tcp" not in _podman:
        engine_host("podman")  # Podman runs here and has the image
        _podman["tcp"] = _serve_podman(f"tcp://127.0.0.1:{free_port()}")
    return _podman["tcp"]


def _start_podman() -> str:
    """``podman system service`` on a socket of its own, stopped when the tests end."""
    folder = Path(tempfile.mkdtemp(prefix="envbuilder-podman-"))
    _podman["host"] = _serve_podman(f"unix://{folder / 'podman.sock'}", folder)
    return _podman["host"]


def _serve_podman(address: str, folder: Path | None = None) -> str:
    podman = shutil.which("podman")
    if podman is None:
        _skip("needs a container engine for the podman sandbox: podman is not installed (apt install podman)")
        raise AssertionError  # unreachable: _skip raises
    # The service runs in a folder of its own, removed when the tests end: conmon writes a file
    # named `oom` into its working directory when the OOM killer takes a container's process,
    # which was the checkout's.
    folder = folder or Path(tempfile.mkdtemp(prefix="envbuilder-podman-"))
    process = subprocess.Popen(
        [podman, "system", "service", "--time=0", address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    _stop_at_exit(process, folder)
    deadline = time.monotonic() + 30
    while not _listening(address):
        if process.poll() is not None or time.monotonic() > deadline:
            _skip(f"needs a container engine for the podman sandbox: its service exited {process.poll()}")
        time.sleep(0.05)
    return address


def _listening(address: str) -> bool:
    scheme, _, rest = address.partition("://")
    if scheme == "unix":
        return Path(rest).exists()
    host, _, port = rest.rpartition(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.2):
        return True
    return False


def _stop_at_exit(process: subprocess.Popen[bytes], folder: Path | None) -> None:
    import atexit

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(stop)


BASE_IMAGE = "envbuilder-base:bookworm"
"""The base the shipped repository tasks' image builds on (Debian minbase with python3 and git:
``envbuilder sandbox build-image --base``, which ``.ci/run`` runs)."""


def needs_base_image() -> str:
    """The local engine's address, when it has :data:`BASE_IMAGE` (skips, or fails under CI)."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST

    async def probe() -> str | None:
        async with Engine(EngineAddress.from_env(host)).connect() as api:
            if await api.image(BASE_IMAGE) is None:
                return f"the engine at {host} has no image {BASE_IMAGE} (sandbox build-image --base)"
        return None

    def run() -> str | None:
        try:
            return asyncio.run(probe())
        except SandboxError as exc:
            return str(exc)

    problem = _checked.get(BASE_IMAGE, "")
    if problem == "":
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            problem = _checked[BASE_IMAGE] = pool.submit(run).result()
    if problem:
        _skip(f"needs a container engine with the base image: {problem}")
    return host


def wait_for(condition: Callable[[], Any], seconds: float = 60) -> bool:
    """Whether ``condition()`` became true within ``seconds`` (asked every 0.2 s, and once more
    at the end): for what an engine or a server does in the background."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())
