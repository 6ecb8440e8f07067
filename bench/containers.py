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
import os
import statistics
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
    from envbuilder.episode import Episode
    from envbuilder.isolation.sandbox import (
        BubblewrapBackend,
        ContainerPool,
        Limits,
        SessionContainers,
        Workspace,
        new_name,
        run_code,
    )
    from envbuilder.protocol import RunToolSuccess

    env = load_environment(ROOT / "envs" / "swe_tomli.yaml")
    containers = env.containers
    assert containers is not None
    task = env.split("test").task(0)
    await containers.image()  # the image is built (or found) once, outside the figures

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

    bare = SessionContainers(
        containers.spec.model_copy(update={"repository": None}),
        containers.base_dir,
        image=await containers.image(),
        environment="bench-bare",
    )
    for label, owner in (("repository", containers), ("bare", bare)):
        warm = await _warm_starts(owner, task, args.starts, ContainerPool(warm=min(4, args.starts)))
        print(f"create-to-ready (from the warm pool, {label}, n={len(warm)}): "
              f"p50 {_pct(warm, 0.5) * 1000:.0f} ms, p99 {_pct(warm, 0.99) * 1000:.0f} ms")  # fmt: skip

    if args.hold:
        await _hold(bare, args.hold)

    async def episode(index: int) -> float | None:
        view = env.split("test")
        row = view.task(index % len(view))
        ep = Episode(task=row)
        try:
            await env.call_tool(ep, "bash", {"code": "git status --short | wc -l"})
            result = await env.call_tool(ep, "submit", {"answer": row["patch"]})
        finally:
            await env.end_session(ep)
        return result.output.reward if isinstance(result, RunToolSuccess) else None

    for concurrency in (int(c) for c in str(args.concurrency).split(",")):
        sem = asyncio.Semaphore(concurrency)

        async def bounded(i: int, sem: asyncio.Semaphore = sem) -> float | None:
            async with sem:
                return await episode(i)

        count = max(args.episodes, concurrency)
        began = time.monotonic()
        rewards = await asyncio.gather(*(bounded(i) for i in range(count)))
        took = time.monotonic() - began
        lost = sum(1 for r in rewards if r is None)
        seen = sorted(set(rewards), key=str)
        print(f"repository-task episodes at {concurrency} sessions: {count / took:.2f} episodes/s")
        print(f"  ({count} in {took:.0f} s; rewards {seen}; lost grades {lost})")
    async with containers.engine.connect() as api:
        left = await api.containers({"envbuilder.server": os.environ["ENVBUILDER_SERVER_ID"]})
    print(f"containers left: {len(left)}")


async def _warm_starts(containers, task, count: int, pool) -> list[float]:  # type: ignore[no-untyped-def]
    """Create-to-ready of ``count`` sessions that each take a warm container (the pool refilled
    between them, off the clock)."""
    from envbuilder.isolation.sandbox import Workspace

    containers.pool = pool
    took: list[float] = []
    try:
        for _ in range(count):
            containers.start_warming()
            while containers.warm < pool.warm:
                await asyncio.sleep(0.05)
                containers.start_warming()
            began = time.monotonic()
            name = await containers.admit(None)
            await Workspace(containers, name, task).ensure()
            took.append(time.monotonic() - began)
            await containers.remove(name)
    finally:
        containers.pool = None
        await containers.aclose()
        containers._closed = False
    return took


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
    parser.add_argument("--hold", type=int, default=0, help="ready containers to hold at once")
    asyncio.run(main(parser.parse_args()))
