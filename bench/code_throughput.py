#!/usr/bin/env python3
"""How fast code answers are graded, and what the sandbox costs.

1. Serves ``envs/humaneval.yaml`` (``envbuilder serve`` in a subprocess; sandbox runs use
   bubblewrap, at most ``$ENVBUILDER_SANDBOX_CONCURRENCY`` at once, default the cores) and
   submits the canonical solutions of all 164 problems as full episodes (create → call
   submit → delete) with 1, 8 and 32 episodes in flight: graded answers per second, episode
   latency, and the server process's own CPU per graded answer (the sandboxes' CPU is not
   the server's).
2. Runs the same HumanEval programs as a plain subprocess (``python3 -I main.py`` in a temp
   folder: no isolation, no limits) and in the bubblewrap sandbox, one after the other and
   interleaved program by program, and reports the median time of each and their ratio.

    python bench/code_throughput.py [--levels 1 8 32] [--overhead-programs 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from envbuilder.environment import load_environment
from envbuilder.sandbox import Limits, default_backend, default_concurrency

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "envs" / "humaneval.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def episode(client: httpx.AsyncClient, index: int, answer: str) -> float:
    start = time.perf_counter()
    h = {"X-Session-ID": f"bench-{index}-{time.monotonic_ns()}"}
    (await client.post("/create", headers=h, json={"split": "test", "index": index})).raise_for_status()
    r = await client.post("/humaneval/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
    assert '"reward":1.0' in r.text.replace(" ", ""), r.text[-500:]
    await client.post("/delete", headers=h)
    return time.perf_counter() - start


async def graded(url: str, answers: list[str], level: int) -> tuple[float, list[float]]:
    limits = httpx.Limits(max_connections=level * 2, max_keepalive_connections=level * 2)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:
        gate = asyncio.Semaphore(level)

        async def one(i: int) -> float:
            async with gate:
                return await episode(client, i, answers[i])

        start = time.perf_counter()
        times = await asyncio.gather(*(one(i) for i in range(len(answers))))
        return time.perf_counter() - start, sorted(times)


def programs() -> tuple[list[str], list[str]]:
    env = load_environment(SPEC)
    view = env.split("test")
    tasks = [view.task(i) for i in range(len(view))]
    answers = [t["canonical_solution"] for t in tasks]
    progs = [
        f"{t['prompt']}{t['canonical_solution']}\n\n{t['test']}\n\ncheck({t['entry_point']})\n" for t in tasks
    ]
    return answers, progs


async def overhead(progs: list[str]) -> tuple[list[float], list[float]]:
    backend = default_backend()
    limits = Limits(wall_seconds=30, cpu_seconds=30)
    plain, boxed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "main.py"
        for prog in progs:
            path.write_text(prog)
            start = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                "/usr/bin/python3",
                "-I",
                "main.py",
                cwd=tmp,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            assert await proc.wait() == 0
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            result = await backend.run(["python3", "-I", "main.py"], {"main.py": prog.encode()}, limits)
            assert result.ok, result.describe()
            boxed.append(time.perf_counter() - start)
    return plain, boxed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--overhead-programs", type=int, default=60)
    args = ap.parse_args()
    answers, progs = programs()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", str(SPEC), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        proc = psutil.Process(server.pid)
        asyncio.run(graded(url, answers[:4], 2))  # warm up
        load = os.getloadavg()[0]
        print(f"sandbox slots: {default_concurrency()}; {os.cpu_count()} cores, load {load:.1f}")
        print("| in flight | graded/s | episode p50 (ms) | p90 (ms) | server CPU per answer (ms) |")
        print("|---|---|---|---|---|")
        for level in args.levels:
            before = sum(proc.cpu_times()[:2])
            wall, times = asyncio.run(graded(url, answers, level))
            cpu = sum(proc.cpu_times()[:2]) - before
            n = len(answers)
            print(
                f"| {level} | {n / wall:.1f} | {times[n // 2] * 1e3:.0f} | {times[int(n * 0.9)] * 1e3:.0f} "
                f"| {cpu / n * 1e3:.1f} |",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
    plain, boxed = asyncio.run(overhead(progs[: args.overhead_programs]))
    p, b = statistics.median(plain), statistics.median(boxed)
    print(
        f"\n{len(plain)} programs, interleaved: plain subprocess median {p * 1e3:.1f} ms, "
        f"bubblewrap sandbox median {b * 1e3:.1f} ms: {b / p:.2f}x, +{(b - p) * 1e3:.1f} ms per run"
    )


if __name__ == "__main__":
    main()
