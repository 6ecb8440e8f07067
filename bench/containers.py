"""Session containers on a real engine: create-to-ready, a bash call's overhead, idle memory,
repository-task episodes per second, and containers left after sessions are abandoned.

    python bench/containers.py [--starts 20] [--calls 30] [--episodes 8] [--concurrency 8]

Measures, on the engine ``DOCKER_HOST`` names (default the local socket):

* **create-to-ready** of a session container of ``envs/swe_tomli.yaml`` (create, start, the
  tomli repository put in and committed), p50 and p99 over ``--starts`` sessions, made one after
  another (cold: nothing is pooled, each is a new container);
* **a bash call** (``true``) in a ready session container, p50 and p99, against the same call in
  bubblewrap (the ``bash`` tool without a `sandbox:`);
* **idle memory** of a ready container (the engine's ``memory_stats.usage`` less its cache);
* **repository-task episodes per second** at ``--concurrency`` sessions: each episode makes its
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
    from envbuilder.protocol import RunToolSuccess
    from envbuilder.sandbox import BubblewrapBackend, Limits, Workspace, new_name, run_code

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

    sem = asyncio.Semaphore(args.concurrency)

    async def bounded(i: int) -> float | None:
        async with sem:
            return await episode(i)

    began = time.monotonic()
    rewards = await asyncio.gather(*(bounded(i) for i in range(args.episodes)))
    took = time.monotonic() - began
    lost = sum(1 for r in rewards if r is None)
    seen = sorted(set(rewards), key=str)
    print(f"repository-task episodes at {args.concurrency} sessions: {args.episodes / took:.2f} episodes/s")
    print(f"  ({args.episodes} in {took:.0f} s; rewards {seen}; lost grades {lost})")
    async with containers.engine.connect() as api:
        left = await api.containers({"envbuilder.server": os.environ["ENVBUILDER_SERVER_ID"]})
    print(f"containers left: {len(left)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    asyncio.run(main(parser.parse_args()))
