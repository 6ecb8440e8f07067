#!/usr/bin/env python3
"""Generated tasks against Parquet rows: `/task` latency and throughput, start-up and memory with
huge `num_tasks`, and the reasoning-gym checker's grading throughput.

Each spec is served by its own ``envbuilder serve`` process (one worker). Start-up is the time
from launching the process until ``/health`` answers (imports included), RSS is read after
start-up and again after the latency run. ``/task`` latency is measured one request at a time
on random indices (p50/p99); tasks per second with ``--concurrency`` requests in flight.
Specs: the shipped GSM8K train split (Parquet), the built-in `arithmetic` generator, and
reasoning-gym's five families of ``envs/reasoning_mix.yaml`` (medium level); the generated
ones at ``num_tasks`` 10³, 10⁶ and 10⁹.

    python bench/generators.py --requests 2000 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT = {"template": "{{ question }}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def specs(folder: Path) -> dict[str, tuple[Path, str]]:
    """Label → (spec file, split)."""
    out: dict[str, tuple[Path, str]] = {"parquet (GSM8K train)": (ROOT / "envs" / "gsm8k.yaml", "train")}
    mix = yaml.safe_load((ROOT / "envs" / "reasoning_mix.yaml").read_text())
    for n in (10**3, 10**6, 10**9):
        arithmetic = {
            "name": f"arith{n}",
            "dataset": {"type": "generator", "generator": "arithmetic", "num_tasks": n},
            "splits": {"train": {"type": "train"}},
            "prompt": PROMPT,
            "grader": {"type": "exact_match", "target": "{{ answer }}"},
        }
        path = folder / f"arith{n}.yaml"
        path.write_text(yaml.safe_dump(arithmetic))
        out[f"generator arithmetic, n=10^{len(str(n)) - 1}"] = (path, "train")
        rg = {**mix, "name": f"rg{n}", "dataset": {**mix["dataset"], "num_tasks": n}}
        rg["splits"] = {"medium": {"source": "medium"}}
        rg.pop("tests", None)
        path = folder / f"rg{n}.yaml"
        path.write_text(yaml.safe_dump(rg))
        out[f"reasoning_gym 5 families, n=10^{len(str(n)) - 1}"] = (path, "medium")
    return out


def start(spec: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", str(spec), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url, time.perf_counter() - started
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"serve {spec} exited with {process.returncode}")
        time.sleep(0.01)


def stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(20)


def rss_mb(process: subprocess.Popen[bytes]) -> float:
    return float(psutil.Process(process.pid).memory_info().rss / 2**20)


async def latency(url: str, env: str, split: str, n: int, requests: int) -> list[float]:
    rng = random.Random(0)
    out = []
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(requests):
            body = {"split": split, "index": rng.randrange(n)}
            t = time.perf_counter()
            r = await client.post(f"/{env}/task", json=body)
            out.append(time.perf_counter() - t)
            r.raise_for_status()
    return out


async def throughput(url: str, env: str, split: str, n: int, requests: int, concurrency: int) -> float:
    rng = random.Random(1)
    indices = [rng.randrange(n) for _ in range(requests)]
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits) as client:
        queue = list(indices)

        async def worker() -> None:
            while queue:
                i = queue.pop()
                r = await client.post(f"/{env}/task", json={"split": split, "index": i})
                r.raise_for_status()

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return requests / (time.perf_counter() - t)


def grading(answers: int) -> dict[str, float]:
    """reasoning-gym answers scored per second, in process (the grader's own work, no HTTP)."""
    from envbuilder.environment import load_environment

    env = load_environment(ROOT / "envs" / "reasoning_mix.yaml")
    assert env.submit is not None
    grader = env.submit.grader
    view = env.split("medium")
    tasks = [view.task(i) for i in range(answers)]

    async def run() -> float:
        t = time.perf_counter()
        for i, task in enumerate(tasks):
            await grader.grade(str(task["answer"]) if i % 2 == 0 else "wrong", task, {})
        return answers / (time.perf_counter() - t)

    return {"sequential answers/s": asyncio.run(run())}


def child(spec: str, split: str, reads: int) -> None:
    """In a fresh process: CPU seconds to import and load the spec, RSS, CPU µs per random task."""
    import json
    import resource

    cpu0, wall0 = time.process_time(), time.perf_counter()
    from envbuilder.environment import load_environment

    env = load_environment(spec)
    loaded = (time.process_time() - cpu0, time.perf_counter() - wall0)
    view = env.split(split)
    rng = random.Random(2)
    picks = [rng.randrange(len(view)) for _ in range(reads)]
    cpu1 = time.process_time()
    for i in picks:
        view.task(i)
    per_task = (time.process_time() - cpu1) / reads
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"load_cpu": loaded[0], "load_wall": loaded[1], "rss": rss, "task_us": per_task * 1e6}))


def inprocess(folder: Path, reads: int) -> None:
    import json

    print(f"In process (CPU time, robust to the machine's load), {reads} random tasks per spec:\n")
    print("| source | load CPU s (imports included) | load wall s | peak RSS MB | CPU µs per task |")
    print("|---|---|---|---|---|")
    for label, (spec, split) in specs(folder).items():
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(spec), split, str(reads)],
            capture_output=True,
            text=True,
            check=True,
        )
        m = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"| {label} | {m['load_cpu']:.2f} | {m['load_wall']:.2f} | {m['rss']:.0f} | {m['task_us']:.0f} |"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=2000, help="random tasks read in process per spec")
    parser.add_argument("--inprocess-only", action="store_true", help="skip the HTTP servers")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        inprocess(Path(tmp), args.reads)
        grade: dict[str, Any] = grading(args.answers)
        print(
            f"\nreasoning_gym grader, {args.answers} answers (half right), in process: "
            f"{grade['sequential answers/s']:,.0f} answers/s\n"
        )
        if args.inprocess_only:
            return
        for label, (spec, split) in specs(Path(tmp)).items():
            name = yaml.safe_load(spec.read_text())["name"]
            process, url, ready = start(spec)
            try:
                rss0 = rss_mb(process)
                n = httpx.post(f"{url}/{name}/num_tasks", json={"split": split}).json()
                n = n["num_tasks"] if isinstance(n, dict) else int(n)
                lat = asyncio.run(latency(url, name, split, n, args.requests))
                tps = asyncio.run(throughput(url, name, split, n, args.requests, args.concurrency))
                rss1 = rss_mb(process)
            finally:
                stop(process)
            q = statistics.quantiles(lat, n=100)
            rows.append((label, f"{n:,}", ready, rss0, rss1, statistics.median(lat) * 1e3, q[98] * 1e3, tps))
            print(rows[-1], file=sys.stderr, flush=True)
    cpus = os.cpu_count()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Run {when}, {cpus} cores (shared, loaded), Python {sys.version.split()[0]}; ", end="")
    print(f"{args.requests} random /task per spec, c={args.concurrency}.\n")
    print("| source | num_tasks | start-up s | RSS MB ready | RSS MB after ", end="")
    print("| /task p50 ms | /task p99 ms | /task/s |")
    print("|---|---|---|---|---|---|---|---|")
    for label, n, ready, rss0, rss1, p50, p99, tps in rows:
        print(
            f"| {label} | {n} | {ready:.2f} | {rss0:.0f} | {rss1:.0f} | {p50:.2f} | {p99:.2f} | {tps:,.0f} |"
        )


if __name__ == "__main__":
    main()
