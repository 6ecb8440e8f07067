"""``deploy/replicas.sh`` on the local Docker engine: two replicas (two workers each) on one
Redis behind nginx, images built here FROM ``envbuilder-base:bookworm`` (no registry). Both
reference clients play their episodes through the balancer; replica 1 is SIGKILLed in the middle
of an episode (its session created, its answer not yet sent), and no grade is lost: every reward
is the right one and the grade counts in Redis equal the answers.

The first build downloads the dependencies (minutes, bench/README.md); later builds reuse that
layer while pyproject.toml is unchanged."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envbuilder.environment import Environment
from tests.conftest import ROOT
from tests.sandboxes import BASE_IMAGE, needs_base_image
from tests.servers import free_port

SCRIPT = ROOT / "deploy" / "replicas.sh"
EPISODES = 20  # per client
KEY = "k-replicas-0123456789abcdefghij"


def _script(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(SCRIPT), *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"replicas.sh {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    needs_base_image()
    keys = tmp_path_factory.mktemp("deploy") / "api_keys.txt"
    keys.write_text(f"{KEY}\n")
    keys.chmod(0o644)  # the replicas' user (uid 10001) reads it
    env = {
        "BASE": BASE_IMAGE,
        "NAME": "ebtest-" + uuid.uuid4().hex[:8],
        "PORT": str(free_port()),
        "KEYS": str(keys),
        "REPLICAS": "2",
        "WORKERS": "2",
        # One spec, as in test_replicas.py: ors-sdk's session sends no env_name, so a server of
        # several specs would give it the default (first) one.
        "SPECS": "/srv/envs/gsm8k.yaml",
    }
    # The authorities this host added (a TLS-intercepting proxy's): pip in the build needs them.
    added = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    if added:
        ca = keys.parent / "extra-ca.pem"
        ca.write_text("".join(p.read_text() for p in added))
        env["PIP_CA_FILE"] = str(ca)
    _script(env, "build", timeout=3600)
    try:
        _script(env, "up")
        url = f"http://127.0.0.1:{env['PORT']}"
        deadline = time.monotonic() + 600
        healthy = 0
        while healthy < 6:  # several answers in a row: both replicas up (round robin)
            assert time.monotonic() < deadline, "the replicas did not become healthy"
            try:
                ok = httpx.get(url + "/health", timeout=10).status_code == 200
            except httpx.HTTPError:
                ok = False
            healthy = healthy + 1 if ok else 0
            time.sleep(0.5)
        yield url, env
    finally:
        subprocess.run([str(SCRIPT), "down"], env={**os.environ, **env}, capture_output=True, timeout=300)


def _gold(gsm8k: Environment, index: int) -> str:
    return gsm8k.split("test").task(index)["answer"].split("####")[-1].strip()


def _grades(env: dict[str, str]) -> dict[str, int]:
    out = subprocess.run(
        ["docker", "exec", env["NAME"] + "-redis", "redis-cli", "HGETALL", "eb:grades"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {out[i]: int(out[i + 1]) for i in range(0, len(out), 2)}


def _replica_running(env: dict[str, str], n: int) -> bool:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Running}}", f"{env['NAME']}-replica-{n}"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() == "true"


def test_two_replicas_one_killed_mid_episode_lose_no_grade(
    stack: tuple[str, dict[str, str]], gsm8k: Environment
) -> None:
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    url, env = stack
    # Both replicas answer (each serves its own cache directory: the split's row index is built
    # per host) before any episode.
    assert httpx.get(url + "/gsm8k/splits", headers={"X-API-Key": KEY}, timeout=60).status_code == 200
    assert httpx.get(url + "/gsm8k/splits", timeout=60).status_code == 401  # the key is required
    rewards: list[float | None] = []
    killed_at = None
    with ORS(base_url=url, api_key=KEY) as client:
        environment = client.environment("gsm8k")
        for i in range(EPISODES):
            with environment.session(split="test", index=i) as s:
                assert s.get_prompt()[0].text
                if i == EPISODES // 2:
                    _script(env, "kill", "1")  # mid-episode: created, prompted, not answered
                    killed_at = i
                answer = _gold(gsm8k, i) if i % 2 == 0 else "-1"
                rewards.append(s.call_tool("submit", {"answer": answer}).reward)
    assert killed_at == EPISODES // 2 and not _replica_running(env, 1) and _replica_running(env, 2)
    api = EnvironmentsAPI(base_url=url, api_key=KEY)
    try:
        environment = api.get(name="gsm8k", variant="gsm8k")
        for i in range(EPISODES):
            with environment.session(split="test", index=i) as s:
                assert s.get_messages()[0].role == "user"
                answer = _gold(gsm8k, i) if i % 2 == 0 else "-1"
                out = s.call_tool("submit", {"answer": answer})
                assert out.finished
                rewards.append(out.reward)
    finally:
        close = getattr(api, "close", None)
        if close is not None:
            close()
    assert rewards == [1.0, 0.0] * EPISODES
    # Every answer graded exactly once, across both replicas and the kill.
    assert _grades(env) == {"correct": EPISODES, "incorrect": EPISODES}


def test_the_script_names_every_container_of_its_stack() -> None:
    """Two stacks on one host do not collide: every name the script makes carries ``$NAME``."""
    text = Path(SCRIPT).read_text()
    for made in ("--name", "network create"):
        for line in (line for line in text.splitlines() if made in line):
            assert "$NAME" in line or "$net" in line, line
