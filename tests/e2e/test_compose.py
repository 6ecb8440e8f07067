"""``deploy/compose.yaml`` starts: its image installs bubblewrap, and the ``serve`` command line
it runs (a public interface, two workers on Redis) starts with the key from its secret file and
serves the shipped environments, confined. Docker Compose itself is not run here (it would pull
Redis and nginx images); bench/README.md and deploy/README.md say what was run by hand."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from tests.conftest import ENVS, ROOT
from tests.processes import wait_healthy
from tests.servers import free_port

DEPLOY = ROOT / "deploy"


def _compose() -> dict:  # type: ignore[type-arg]
    loaded: dict = yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[type-arg]
    return loaded


def test_the_image_installs_bubblewrap_and_runs_unprivileged() -> None:
    service = _compose()["services"]["envbuilder"]
    assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    install = next(line for line in dockerfile.splitlines() if "apt-get install" in line)
    assert "bubblewrap" in install.split()
    assert "\nUSER envbuilder\n" in dockerfile
    # What bubblewrap needs in a container (user namespaces, a /proc of its own).
    assert set(service["security_opt"]) == {"seccomp=unconfined", "systempaths=unconfined"}


def test_the_compose_command_starts_with_its_key(tmp_path: Path, redis_url: str) -> None:
    compose = _compose()
    service = compose["services"]["envbuilder"]
    assert service["secrets"] == ["api_keys"] and compose["secrets"]["api_keys"]["file"] == "./api_keys.txt"
    key = "k-deploy-0123456789abcdefghij"
    keys = tmp_path / "api_keys.txt"
    keys.write_text(f"{key}\n")
    port = free_port()
    # The container's paths and port, here.
    where = {"/srv/envs": str(ENVS), "/run/secrets/api_keys": str(keys), "8080": str(port)}
    command = []
    for arg in service["command"]:
        option, equals, value = arg.rpartition("=")
        command.append(f"{option}={where.get(value, value)}" if equals else where.get(arg, arg))
    assert command[:2] == ["envbuilder", "serve"] and "--host=0.0.0.0" in command
    env = {**os.environ, **service["environment"], "ENVBUILDER_STORE": redis_url}
    env["ENVBUILDER_CACHE_DIR"] = str(tmp_path / "cache")
    log = tmp_path / "stderr"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "envbuilder", *command[1:]],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=600)
        health = httpx.get(url + "/health")
        body = health.json()
        assert (body["status"], body["confinement"]) == ("ok", "bubblewrap")  # reasoning_mix is served
        # swe_tomli's session containers and the pool they share
        assert set(body) <= {"status", "confinement", "containers", "container_pool"}
        assert httpx.get(url + "/gsm8k/splits").status_code == 401
        assert httpx.get(url + "/gsm8k/splits", headers={"X-API-Key": key}).status_code == 200
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert key not in log.read_text(errors="replace")
