"""Session containers on a real engine: create-to-ready, a bash call's overhead, idle memory,
repository-task episodes per second, and containers left after sessions are abandoned.

    python bench/containers.py [--starts 20] [--calls 30] [--episodes 8] [--concurrency 8,32]
                               [--hold 100]

Measures, on the engine ``DOCKER_HOST`` names (default the local socket):

* **create-to-ready** of a session container of ``envs/swe_tomli.yaml`` (create, start, the
  tomli repository put in and committed), p50 and p99 over ``--starts`` sessions, made one after
  another (cold: nothing is pooled, each is a new container), and from the warm pool
  (:class:`ContainerPool` with warm containers: created and started ahead, so a session's path
  is the claim, the tree and the ready mark), for the spec's `sandbox:` and for the same one
  without a repository (a bare container: the claim and the ready mark only);
* **a bash call** (``true``) in a ready session container, p50 and p99, against the same call in
  bubblewrap (the ``bash`` tool without a `sandbox:`);
* **idle memory** of a ready container (the engine's ``memory_stats.usage`` less its cache);
* **sessions held**: ``--hold`` ready containers at once (made 8 at a time), the host's
  available memory before and after, and a bash call's time while they are all up;
* **repository-task episodes per second** at each ``--concurrency`` (comma-separated): each episode makes its
  container (a bash call), submits the task's gold patch and is graded in a fresh container;
* **leaks**: after every episode, the containers with this run's server id still on the engine
  (target 0), and grades lost (an episode without a reward).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import tarfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    os.environ["ENVBUILDER_SERVER_ID"] = f"bench-{uuid.uuid4().hex[:8]}"
    from envbuilder.environment import load_environment
    from envbuilder.isolation.sandbox import (
        BubblewrapBackend,
        Limits,
        SessionContainers,
        Workspace,
        new_name,
        run_code,
    )

    env = load_environment(ROOT / "envs" / "swe_tomli.yaml")
    containers = env.containers
    assert containers is not None
    task = env.split("test").task(0)
    await containers.image()  # the image is built (or found) once, outside the figures

    bare = SessionContainers(
        containers.spec.model_copy(update={"repository": None}),
        containers.base_dir,
        image=await containers.image(),
        environment="bench-bare",
    )
    if not args.starts:  # only --hold, --served and the episodes
        if args.hold:
            await _hold(bare, args.hold)
        await _episodes(args, env, containers)
        return
    starts: list[float] = []
    names = []
    for _ in range(args.starts):
        name = new_name()
        began = time.monotonic()
        await Workspace(containers, name, task).ensure()
        starts.append(time.monotonic() - began)
        names.append(name)
    print(f"create-to-ready (cold, n={len(starts)}): p50 {_pct(starts, 0.5) * 1000:.0f} ms, "
          f"p99 {_pct(starts, 0.99) * 1000:.0f} ms")  # fmt: skip

    calls: list[float] = []
    for _ in range(args.calls):
        began = time.monotonic()
        await containers.exec(names[0], ["bash", "-c", "true"])
        calls.append(time.monotonic() - began)
    bwrap: list[float] = []
    backend = BubblewrapBackend()
    for _ in range(args.calls):
        began = time.monotonic()
        await run_code(["bash", "_cell.sh"], {"_cell.sh": b"true\n"}, Limits(), backend=backend)
        bwrap.append(time.monotonic() - began)
    ms = {k: (_pct(v, 0.5) * 1000, _pct(v, 0.99) * 1000) for k, v in (("container", calls), ("bwrap", bwrap))}
    print("bash call: " + "; ".join(f"{k} p50 {a:.0f} ms p99 {b:.0f} ms" for k, (a, b) in ms.items()))

    async with containers.engine.connect() as api:
        used = []
        for name in names[: min(5, len(names))]:
            response = await api.request("GET", f"/containers/{name}/stats", params={"stream": 0})
            assert response is not None
            stats = response.json().get("memory_stats") or {}
            cache = (stats.get("stats") or {}).get("inactive_file", 0)
            used.append((stats.get("usage", 0) - cache) / 2**20)
    print(f"idle memory per container: {statistics.mean(used):.1f} MiB (mean of {len(used)})")
    for name in names:
        await containers.remove(name)

    for label, owner, blank in (
        ("repository, made for the task's tree", containers, False),
        ("repository, blank (the tree put in on claim)", containers, True),
        ("no repository", bare, False),
    ):
        ready, first = await _warm_starts(owner, task, args.starts, blank=blank)
        print(f"create-to-ready (from the warm pool, {label}, n={len(ready)}): "
              f"p50 {_pct(ready, 0.5) * 1000:.1f} ms, p99 {_pct(ready, 0.99) * 1000:.1f} ms; "
              f"to the first bash call's end p50 {_pct(first, 0.5) * 1000:.0f} ms, "
              f"p99 {_pct(first, 0.99) * 1000:.0f} ms")  # fmt: skip

    if args.hold:
        await _hold(bare, args.hold)
    await _episodes(args, env, containers)


async def _episodes(args: argparse.Namespace, env, containers) -> None:  # type: ignore[no-untyped-def]
    """Sessions through a real server (``--served``), then repository-task episodes at each
    concurrency: per-episode stage times and CPU seconds, grades lost, containers left."""
    from envbuilder.episode import Episode
    from envbuilder.protocol import RunToolSuccess

    if args.served:
        await asyncio.to_thread(_served, args.served)
    _tests_tree_cost(env)
    stages: dict[str, list[float]] = {"first call (container made)": [], "submit (graded)": []}

    async def episode(index: int) -> float | None:
        view = env.split("test")
        row = view.task(index % len(view))
        ep = Episode(task=row)
        try:
            began = time.monotonic()
            await env.call_tool(ep, "bash", {"code": "git status --short | wc -l"})
            stages["first call (container made)"].append(time.monotonic() - began)
            began = time.monotonic()
            result = await env.call_tool(ep, "submit", {"answer": row["patch"]})
            stages["submit (graded)"].append(time.monotonic() - began)
        finally:
            await env.end_session(ep)
        return result.output.reward if isinstance(result, RunToolSuccess) else None

    for concurrency in (int(c) for c in str(args.concurrency).split(",") if c.strip() not in ("", "0")):
        sem = asyncio.Semaphore(concurrency)
        for values in stages.values():
            values.clear()

        async def bounded(i: int, sem: asyncio.Semaphore = sem) -> float | None:
            async with sem:
                return await episode(i)

        count = max(args.episodes, concurrency)
        meter = _CpuMeter(containers.engine, os.environ["ENVBUILDER_SERVER_ID"])
        watching = asyncio.create_task(meter.run())
        began = time.monotonic()
        rewards = await asyncio.gather(*(bounded(i) for i in range(count)))
        took = time.monotonic() - began
        watching.cancel()
        cpu = meter.report()
        lost = sum(1 for r in rewards if r is None)
        seen = sorted(set(rewards), key=str)
        print(f"repository-task episodes at {concurrency} sessions: {count / took:.3f} episodes/s")
        print(f"  ({count} in {took:.0f} s; rewards {seen}; lost grades {lost}; load average "
              f"{os.getloadavg()[0]:.0f})")  # fmt: skip
        print(
            "  mean per episode: "
            + "; ".join(f"{k} {statistics.mean(v):.1f} s" for k, v in stages.items() if v)
        )
        print("  CPU seconds per episode: " + "; ".join(f"{k} {v / count:.2f}" for k, v in cpu.items()))
    async with containers.engine.connect() as api:
        left = await api.containers({"envbuilder.server": os.environ["ENVBUILDER_SERVER_ID"]})
    print(f"containers left: {len(left)}")


async def _warm_starts(containers, task, count: int, *, blank: bool) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    """Create-to-ready (a place, the name, the set-up left) and create-to-first-call (then a
    bash ``true``) of ``count`` sessions that each take a warm container: one made for the
    task's image and tree (the pool's plan asked for it), or a ``blank`` one (created and
    started: the tree goes in on the session's path). The pool is refilled between them, off
    the clock."""
    from envbuilder.isolation.sandbox import ContainerPool, Workspace
    from envbuilder.isolation.sandbox._warm import BLANK, WarmPlan

    pool = containers.pool = ContainerPool(warm=4)
    containers.plan = WarmPlan()
    key = BLANK if blank else containers.warm_key(task)
    if not blank:
        containers.plan.ask("bench", key, task)
    want = containers.plan.targets(pool.warm, containers._default_key()).get(key, 0)
    ready: list[float] = []
    first: list[float] = []
    try:
        for _ in range(count):
            containers.start_warming()
            while containers.warm_for(key) < want:
                await asyncio.sleep(0.05)
                containers.start_warming()
            began = time.monotonic()
            if blank:
                assert await pool.admit("bench")
                name = containers.take_name(BLANK)
                pool.hold(name)
            else:
                name = await containers.admit("bench", task)
                assert containers.is_ready(name), "the warm container for the task was not handed over"
            await Workspace(containers, name, task).ensure()
            ready.append(time.monotonic() - began)
            await containers.exec(name, ["bash", "-c", "true"])
            first.append(time.monotonic() - began)
            await containers.remove(name)
    finally:
        containers.pool = None
        await containers.aclose()
        containers._closed = False
    return ready, first


def _served(count: int) -> None:
    """Create-to-ready through a real server (``serve --warm-containers 4``) and the reference
    wire: ``POST /create`` of task 0 (the pool hands over a container made for its tree), then
    ``/create`` plus the first ``bash`` call (``true``) to its end; ``count`` sessions, one after
    another, each deleted, the pool refilled between them off the clock."""
    import subprocess
    import sys

    import httpx

    sys.path.insert(0, str(ROOT))
    from tests.servers import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    spec = str(ROOT / "envs" / "swe_tomli.yaml")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "envbuilder", "serve", spec, "--port", str(port), "--warm-containers", "4"]
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body = {"env_name": "swe_tomli", "split": "test", "index": 0}
    call = {"name": "bash", "input": {"code": "true"}}

    def warm(client: httpx.Client) -> dict:  # type: ignore[type-arg]
        try:
            return dict(client.get("/health").json()["containers"]["swe_tomli"])
        except (httpx.HTTPError, KeyError, ValueError):
            return {}

    created: list[float] = []
    first: list[float] = []
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            for i in range(count + 1):
                deadline = time.monotonic() + 600
                # the first session asks for the task (from a blank container); then the plan
                # keeps three of its tree ready (and one blank)
                while time.monotonic() < deadline and warm(client).get("warm", 0) < (4 if i else 1):
                    time.sleep(0.1)
                sid = f"bench-{i}"
                began = time.monotonic()
                response = client.post("/create", json=body, headers={"X-Session-ID": sid})
                assert response.status_code == 200, response.text
                made = time.monotonic() - began
                reply = client.post("/swe_tomli/call", json=call, headers={"X-Session-ID": sid})
                assert reply.status_code == 200 and '"output"' in reply.text, reply.text
                if i:  # (the first one found nothing made for its task)
                    created.append(made)
                    first.append(time.monotonic() - began)
                client.post("/delete", headers={"X-Session-ID": sid})
            report = warm(client)
    finally:
        process.terminate()
        process.wait(60)
    print(f"create-to-ready through the server (from the warm pool, repository, n={len(created)}): "
          f"/create p50 {_pct(created, 0.5) * 1000:.1f} ms, p99 {_pct(created, 0.99) * 1000:.1f} ms; "
          f"to the first bash call's end p50 {_pct(first, 0.5) * 1000:.0f} ms, "
          f"p99 {_pct(first, 0.99) * 1000:.0f} ms; warm hits {report.get('warm_hits')}, "
          f"misses {report.get('warm_misses')}")  # fmt: skip


class _CpuMeter:
    """CPU seconds of this run's containers (their cgroups' ``cpuacct.usage``, sampled every
    0.2 s, the containers listed every second: a lower bound), of the engine's daemons
    (``dockerd``, ``containerd`` and the shims: shared with whatever else uses the engine) and of
    this process (the server's side: trees, patches, the engine's API)."""

    def __init__(self, engine, server: str):  # type: ignore[no-untyped-def]
        self.engine, self.server = engine, server
        self.containers: dict[str, int] = {}
        self.daemons0 = self._daemons()
        self.own0 = time.process_time()

    @staticmethod
    def _daemons() -> float:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)
            except OSError:
                continue
            name = fields[0].split("(", 1)[-1]
            if name in ("dockerd", "containerd") or name.startswith("containerd-shim"):
                parts = fields[1].split()
                total += int(parts[11]) + int(parts[12])  # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    async def run(self) -> None:
        ids: list[str] = []
        listed = 0.0
        while True:
            if time.monotonic() - listed > 1:
                async with self.engine.connect() as api:
                    ids = [str(c["Id"]) for c in await api.containers({"envbuilder.server": self.server})]
                listed = time.monotonic()
            for cid in ids:
                try:
                    used = int(Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage").read_text())
                except (OSError, ValueError):
                    continue
                self.containers[cid] = max(used, self.containers.get(cid, 0))
            await asyncio.sleep(0.2)

    def report(self) -> dict[str, float]:
        return {
            "in the containers (pytest, git, the tools)": sum(self.containers.values()) / 1e9,
            "engine daemons (shared)": self._daemons() - self.daemons0,
            "this process (server side)": time.process_time() - self.own0,
        }


def _tests_tree_cost(env, rounds: int = 6) -> None:  # type: ignore[no-untyped-def]
    """CPU of the tree a grading run gets (task 0's base, its gold patch and test patch, the
    report's nonce file): the nonce put in while the tree is written (now), against the tree
    written, then read and written again to add it (before), in this process, same run."""
    from envbuilder.graders._repo_tree import build_tree
    from envbuilder.isolation.sandbox import repository_tree

    containers = env.containers
    row = env.split("test").task(0)
    base = repository_tree(containers.spec.repository, row, containers.base_dir)
    nonce = {".envbuilder-report-nonce": b"0" * 32}

    def now() -> None:
        build_tree(base, None, row["patch"], row["test_patch"], files=nonce)

    def before() -> None:  # (the grader before: a copy of the tree's archive with the file added)
        built = build_tree(base, None, row["patch"], row["test_patch"])
        out = io.BytesIO()
        with (
            tarfile.open(fileobj=io.BytesIO(built.tar), mode="r:") as src,
            tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as dst,
        ):
            for member in src:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
            for name, data in nonce.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o600
                dst.addfile(info, io.BytesIO(data))

    cost: dict[str, list[float]] = {"before": [], "now": []}
    for _ in range(rounds):  # interleaved, so the machine's load falls on both alike
        for label, work in (("before", before), ("now", now)):
            began = time.process_time()
            work()
            cost[label].append((time.process_time() - began) * 1000)
    print(f"the tests' tree per grading (CPU, n={rounds}): nonce added by re-writing the tree "
          f"median {statistics.median(cost['before']):.0f} ms, written with it "
          f"{statistics.median(cost['now']):.0f} ms")  # fmt: skip


def _available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _hold(containers, count: int) -> None:  # type: ignore[no-untyped-def]
    """``count`` ready idle containers at once: memory, and a call's time while they are up."""
    from envbuilder.isolation.sandbox import Workspace, new_name

    before = _available_mib()
    names = [new_name() for _ in range(count)]
    began = time.monotonic()
    try:
        for i in range(0, count, 8):
            await asyncio.gather(*(Workspace(containers, n, {}).ensure() for n in names[i : i + 8]))
        made = time.monotonic() - began
        await asyncio.sleep(2)
        after = _available_mib()
        calls = []
        for name in names[:: max(1, count // 20)]:
            t = time.monotonic()
            await containers.exec(name, ["bash", "-c", "true"])
            calls.append(time.monotonic() - t)
        each = (before - after) / count
        print(f"held {count} ready containers (made in {made:.0f} s): host memory available "
              f"{before:.0f} -> {after:.0f} MiB ({each:.1f} MiB each, engine and runtime shims "
              f"included); a bash call meanwhile p50 {_pct(calls, 0.5) * 1000:.0f} ms")  # fmt: skip
    finally:
        await asyncio.gather(*(containers.remove(n) for n in names), return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--concurrency", default="8", help="sessions at once, comma-separated (8,32)")
    parser.add_argument("--served", type=int, default=0, help="sessions through a real server (warm pool)")
    parser.add_argument("--hold", type=int, default=0, help="ready containers to hold at once")
    asyncio.run(main(parser.parse_args()))
