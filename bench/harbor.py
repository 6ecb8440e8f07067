"""Harbor task directories on a real engine: the test fixture's oracle episodes per second and
what the verifier costs.

    python bench/harbor.py [--episodes 12] [--concurrency 1,4]

On the engine ``DOCKER_HOST`` names (default the local socket), with
``tests/fixtures/harbor/`` (two tasks, each its own image built from its ``environment/``; the
images are built first, outside the figures):

* **oracle episodes per second** at each ``--concurrency``: an episode runs its task's
  ``solve.sh`` with the ``bash`` tool (the session container is made on that first call) and
  submits; the ``harbor_tests`` grader stops the container, copies the working folder out, runs
  ``tests/test.sh`` in a fresh container of the task's image and reads the reward file. Every
  episode must earn 1.0 (a wrong or lost grade is counted);
* **the verifier's cost**, split: the whole ``submit`` (stop, copy out, fresh container, tests,
  stop, reward copied out, removed) against, measured in the same run, the tests unpacked and
  ``test.sh`` run as one exec in the agent's own ready container (the test script's own time,
  no isolation): the difference is what grading in a fresh container costs;
* **leaks**: containers with this run's server id left on the engine after every episode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "fixtures" / "harbor" / "harbor.yaml"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: list[float]) -> str:
    return f"p50 {_pct(values, 0.5) * 1000:.0f} ms, p99 {_pct(values, 0.99) * 1000:.0f} ms"


async def main(args: argparse.Namespace) -> None:
    server = f"bench-{uuid.uuid4().hex[:8]}"
    os.environ["ENVBUILDER_SERVER_ID"] = server
    from envbuilder.environment import load_environment
    from envbuilder.inprocess import LocalEpisode
    from envbuilder.protocol import ToolOutput

    env = load_environment(SPEC)
    containers = env.containers
    assert containers is not None
    view = env.split("test")
    tasks = [view.task(i) for i in range(len(view))]
    for task in tasks:
        await containers.image(task)  # built (or found) once, outside the figures

    agent: list[float] = []
    grading: list[float] = []
    script: list[float] = []
    wrong = 0

    async def episode(index: int, *, baseline: bool) -> None:
        nonlocal wrong
        task = tasks[index % len(tasks)]
        played = LocalEpisode(env, task)
        oracle = json.loads(task["oracle"])[0]
        try:
            began = time.monotonic()
            await played.acall("bash", oracle["arguments"])
            agent.append(time.monotonic() - began)
            if baseline:  # the test script alone, in the agent's ready container (no isolation)
                name = played.state.sandbox
                assert name is not None
                code = (
                    f"mkdir -p /tests /logs/verifier && echo {task['tests']} | base64 -d | tar -x -C /tests "
                    "&& bash /tests/test.sh && cat /logs/verifier/reward.*"
                )
                began = time.monotonic()
                work = containers.spec.workdir
                ran = await containers.exec(name, ["bash", "-c", code], user=0, workdir=work)
                script.append(time.monotonic() - began)
                last = ran.stdout.strip().splitlines()[-1]
                verdict = json.loads(last)
                assert ran.ok and (verdict == 1 or verdict.get("reward") == 1), ran.stdout + ran.stderr
                await containers.exec(name, ["rm", "-rf", "/tests", "/logs"], user=0)
            began = time.monotonic()
            out = await played.acall("submit", {"answer": ""})
            grading.append(time.monotonic() - began)
            if not (isinstance(out, ToolOutput) and out.reward == 1.0 and out.finished):
                wrong += 1
        finally:
            await played.aend()

    for i in range(len(tasks)):  # one warm-up episode per task (first exec paths, caches)
        await episode(i, baseline=False)
    agent.clear()
    grading.clear()
    wrong = 0

    for i in range(args.episodes):  # one at a time: the verifier's cost against its baseline
        await episode(i, baseline=True)
    print(f"oracle call (container made on it, solve.sh), n={len(agent)}: {_ms(agent)}")
    print(f"test.sh alone as an exec in the agent's container, n={len(script)}: {_ms(script)}")
    print(f"submit graded by harbor_tests (fresh container), n={len(grading)}: {_ms(grading)}")
    extra = statistics.median(grading) - statistics.median(script)
    print(f"  the fresh container's cost over the script alone (p50 difference): {extra * 1000:.0f} ms")

    for concurrency in args.concurrency:
        gate = asyncio.Semaphore(concurrency)
        wrong_before = wrong

        async def one(i: int, gate: asyncio.Semaphore = gate) -> None:
            async with gate:
                await episode(i, baseline=False)

        began = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(args.episodes)))
        took = time.monotonic() - began
        print(
            f"oracle episodes at concurrency {concurrency}: {args.episodes / took:.3f} episodes/s "
            f"({args.episodes} in {took:.1f} s), wrong or lost grades {wrong - wrong_before}"
        )

    async with containers.engine.connect() as api:
        left = await api.containers({"envbuilder.server": server})
    print(f"containers left with this run's server id: {len(left)}; wrong or lost grades in all: {wrong}")
    await env.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    asyncio.run(main(parser.parse_args()))
