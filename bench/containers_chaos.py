"""Chaos for session containers: two servers on one Redis, one killed with SIGKILL every
``--kill-every`` seconds (and started again), sessions abandoned, the engine restarted once; then
the containers left behind and the grades lost are counted.

    python bench/containers_chaos.py [--minutes 10] [--kill-every 60] [--clients 4]
                                     [--own-engine] [--spec envs/swe_tomli.yaml]

Each client loops: create a session on either server, a ``bash`` call, then either abandons it
(a third of the time: no delete, no submit; its session expires in Redis) or submits the task's
gold patch. A call whose server died is re-attached on the other server by its ``task_id`` (the
store's lease hands it over) or, when it never started, sent again. At the end the servers run
on past the session timeout so abandoned sessions expire, are stopped with SIGTERM, and then:

* **leaked containers**: containers on the engine carrying the store's label (target 0);
* **lost grades**: submitted gold patches whose reward never reached the client (target 0);
  void grades (a null reward: the engine failed under the grader, outside the answer) are
  counted apart, as are wrong ones (a gold patch that did not pay 1.0).

``--own-engine`` starts a second ``dockerd`` on its own socket and data root (the session image
is copied into it with ``docker save | docker load``) and restarts it half-way through; without
it the run uses ``DOCKER_HOST`` and does not restart the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.redisd import RedisServer  # noqa: E402
from tests.servers import free_port  # noqa: E402

D2 = {"sock": "/tmp/d2.sock", "data": "/tmp/d2", "exec": "/tmp/d2x", "pid": "/tmp/d2.pid"}


class Server:
    """``envbuilder serve`` in its own process group, started again after each kill."""

    def __init__(self, spec: str, store: str, server_id: str, env: dict[str, str], timeout: float):
        self.spec, self.store, self.id, self.env, self.timeout = spec, store, server_id, env, timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "envbuilder", "serve", self.spec, "--port", str(self.port),
                "--store", self.store, "--reap-interval", "1", "--session-timeout", str(self.timeout),
                "--warm-containers", "2", "--max-containers", "24", "--container-wait", "20"]  # fmt: skip
        env = {**os.environ, **self.env, "ENVBUILDER_SERVER_ID": self.id, "PYTHONPATH": str(ROOT)}
        log = Path(f"/tmp/envbuilder-chaos-{self.id}.log").open("ab")  # noqa: SIM115 (the child's)
        self.process = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def healthy(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(self.url + "/health", timeout=2).status_code == 200
        return False

    def signal(self, sig: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            self.process.wait()


class Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __str__(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))


def _events(text: str) -> dict[str, Any]:
    """The last ``data:`` JSON of an SSE reply, and its task id."""
    found: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data.startswith("{"):
                found["result"] = json.loads(data)
            elif "task_id" not in found and len(data) == 32:
                found["task_id"] = data
            else:
                found["error"] = data
    return found


async def _call(
    servers: list[Server], sid: str, name: str, tool_input: dict[str, Any], deadline: float
) -> Any:
    """One tool call, re-attached on another server by its task id when its server dies."""
    task_id: str | None = None
    while time.monotonic() < deadline:
        server = random.choice(servers)
        body: dict[str, Any] = {"name": name, "input": tool_input}
        if task_id is not None:
            body["task_id"] = task_id
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
                response = await client.post(f"/{ENV}/call", json=body, headers={"X-Session-ID": sid})
        except httpx.HTTPError:
            await asyncio.sleep(0.5)
            continue
        if response.status_code in (502, 503):
            await asyncio.sleep(1)
            continue
        if response.status_code != 200:
            return ("http", response.status_code)
        found = _events(response.text)
        task_id = task_id or found.get("task_id")
        if "result" in found:
            return found["result"]
        if found.get("error") and "unknown task_id" not in found["error"]:
            return ("error", found["error"])
        await asyncio.sleep(0.5)  # the stream broke (its server died): re-attach by task id
    return None


async def _create(servers: list[Server], sid: str, index: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        server = random.choice(servers)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                body = {"env_name": ENV, "split": "test", "index": index}
                response = await client.post("/create", json=body, headers={"X-Session-ID": sid})
        except httpx.HTTPError:
            await asyncio.sleep(0.5)
            continue
        if response.status_code == 200 or "already exists" in response.text:
            return True
        await asyncio.sleep(1)
    return False


ENV = "swe_tomli"


async def client_loop(servers: list[Server], tasks: list[dict[str, Any]], until: float, tally: Tally) -> None:
    while time.monotonic() < until:
        index = random.randrange(len(tasks))
        sid = uuid.uuid4().hex
        deadline = time.monotonic() + 600
        if not await _create(servers, sid, index, deadline):
            tally.counts["create failed"] += 1
            continue
        tally.counts["sessions"] += 1
        await _call(servers, sid, "bash", {"code": "git status --short | wc -l"}, deadline)
        if random.random() < 1 / 3:
            tally.counts["abandoned"] += 1
            continue
        tally.counts["submitted"] += 1
        result = await _call(servers, sid, "submit", {"answer": tasks[index]["patch"]}, deadline)
        if isinstance(result, dict) and result.get("ok"):
            reward = result["output"].get("reward")
            outcome = "void" if reward is None else f"graded {reward}"
            tally.counts[outcome] += 1
            if reward != 1.0:
                said = json.dumps(result["output"].get("metadata"))[:600]
                print(f"  {outcome}: {sid} {said}", flush=True)
        elif isinstance(result, tuple) and "finished" in str(result[1]):
            tally.counts["graded earlier (a re-sent submit)"] += 1
        else:
            tally.counts["lost"] += 1
            print(f"  lost: {sid} {result}", flush=True)


def _engine_containers(host: str, store_label: str | None) -> list[str]:
    from envbuilder.isolation.sandbox._engine import Engine, EngineAddress

    async def query() -> list[str]:
        async with Engine(EngineAddress.from_env(host)).connect() as api:
            found = await api.containers({"envbuilder.store": store_label} if store_label else {})
        return [str(c["Names"][0]) for c in found]

    return asyncio.run(query())


def _start_engine() -> subprocess.Popen[bytes]:
    for path in (D2["data"], D2["exec"]):
        Path(path).mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        ["dockerd", "--host", f"unix://{D2['sock']}", "--data-root", D2["data"], "--exec-root", D2["exec"],
         "--pidfile", D2["pid"], "--bridge", "none", "--iptables=false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["docker", "-H", f"unix://{D2['sock']}", "version"], capture_output=True, check=False
        )
        if done.returncode == 0:
            return process
        time.sleep(0.5)
    raise RuntimeError("the second dockerd did not start")


def _copy_images(images: list[str]) -> None:
    for image in images:
        have = ["docker", "-H", f"unix://{D2['sock']}", "image", "inspect", image]
        if subprocess.run(have, capture_output=True, check=False).returncode == 0:
            continue
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", f"unix://{D2['sock']}", "load"], stdin=save.stdout, check=True,
                       capture_output=True)  # fmt: skip
        save.wait()


def main(args: argparse.Namespace) -> None:
    from envbuilder.environment import load_environment

    spec = str((ROOT / args.spec).resolve())
    env = load_environment(spec)
    assert env.containers is not None
    image = asyncio.run(env.containers.image())  # built (or found) on the default engine
    tasks = [env.split("test").task(i) for i in range(len(env.split("test")))]
    engine: subprocess.Popen[bytes] | None = None
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if args.own_engine:
        engine = _start_engine()
        _copy_images([image])
        host = f"unix://{D2['sock']}"
    redis = RedisServer()
    redis.start()
    run = uuid.uuid4().hex[:6]
    servers = [Server(spec, redis.url, f"chaos-{run}-{n}", {"DOCKER_HOST": host}, args.session_timeout)
               for n in "ab"]  # fmt: skip
    tally = Tally()
    kills = restarts = 0
    began = time.monotonic()
    try:
        for server in servers:
            server.start()
        while not all(s.healthy() for s in servers):
            time.sleep(0.5)
        until = began + args.minutes * 60

        async def chaos() -> None:
            nonlocal kills, restarts
            clients = [
                asyncio.create_task(client_loop(servers, tasks, until, tally)) for _ in range(args.clients)
            ]
            restarted = not args.own_engine
            next_kill = time.monotonic() + args.kill_every
            while time.monotonic() < until:
                await asyncio.sleep(1)
                if time.monotonic() >= next_kill:
                    victim = servers[kills % 2]
                    victim.signal(signal.SIGKILL)
                    kills += 1
                    victim.start()
                    next_kill += args.kill_every
                    print(f"{time.monotonic() - began:5.0f} s  SIGKILL {victim.id}; {tally}", flush=True)
                if not restarted and time.monotonic() > began + args.minutes * 30:
                    assert engine is not None
                    os.killpg(engine.pid, signal.SIGTERM)
                    engine.wait()
                    _start_engine_again()
                    restarts += 1
                    restarted = True
                    print(f"{time.monotonic() - began:5.0f} s  engine restarted; {tally}", flush=True)
            await asyncio.gather(*clients)

        def _start_engine_again() -> None:
            nonlocal engine
            engine = _start_engine()

        asyncio.run(chaos())
        print(f"clients done at {time.monotonic() - began:.0f} s: {tally}", flush=True)
        store_id = subprocess.run(
            ["redis-cli", "-p", str(redis.port), "GET", "eb:store"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # Abandoned sessions expire; the servers' reapers remove their containers.
        settle = time.monotonic() + args.session_timeout + 30
        while time.monotonic() < settle and _engine_containers(host, store_id):
            time.sleep(2)
        for server in servers:
            server.signal(signal.SIGTERM)
        time.sleep(2)
        leaked = _engine_containers(host, store_id)
        grades = subprocess.run(
            ["redis-cli", "-p", str(redis.port), "HGETALL", "eb:grades"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        took = time.monotonic() - began
        print(f"chaos run: {took / 60:.1f} min, {kills} SIGKILLs, {restarts} engine restart(s)")
        print(f"  episodes: {tally}")
        print(f"  grades saved in the store: {dict(zip(grades[::2], grades[1::2], strict=False))}")
        print(f"  leaked containers: {len(leaked)} {leaked[:5]}")
        print(f"  lost grades: {tally.counts['lost']}")
    finally:
        for server in servers:
            server.signal(signal.SIGKILL)
        redis.stop()
        shutil.rmtree(redis.dir, ignore_errors=True)
        if engine is not None:
            for name in _engine_containers(host, None):
                subprocess.run(
                    ["docker", "-H", host, "rm", "-f", name.lstrip("/")], capture_output=True, check=False
                )
            os.killpg(engine.pid, signal.SIGTERM)
            engine.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--kill-every", type=float, default=60)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--session-timeout", type=float, default=120)
    parser.add_argument("--spec", default="envs/swe_tomli.yaml")
    parser.add_argument("--own-engine", action="store_true", help="a dockerd of its own, restarted half-way")
    main(parser.parse_args())
