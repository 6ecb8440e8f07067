#!/usr/bin/env python3
"""How fast code answers are graded, and what each sandbox backend costs.

1. Serves ``envs/humaneval.yaml`` (``envbuilder serve`` in a subprocess; sandbox runs use the
   first of ``--backends``, at most ``$ENVBUILDER_SANDBOX_CONCURRENCY`` at once, default the
   cores) and submits the canonical solutions of all 164 problems as full episodes (create →
   call submit → delete) with 1, 8 and 32 episodes in flight: graded answers per second,
   episode latency, and the server process's own CPU per graded answer (the sandboxes' CPU is
   not the server's). ``--levels`` with no value skips it.
2. Runs the same HumanEval programs as a plain subprocess (``python3 -I main.py`` in a temp
   folder: no isolation, no limits) and in each backend, one after the other and interleaved
   program by program, and reports each one's p50 and p99, and its overhead over the plain
   run of the same program (p50 and p99 of the differences).
3. With ``--check-sample N``: the wall time of ``envbuilder check envs/humaneval.yaml --sample
   N`` (a fresh process; the gold answers of N problems and the spec's 11 tests) per backend.

Backends: ``bubblewrap``, ``docker`` (the engine at ``$DOCKER_HOST``), ``podman`` (the engine
at ``$PODMAN_HOST``, e.g. ``unix:///run/podman/podman.sock``); the container ones need the
sandbox image (``envbuilder sandbox build-image``).

    python bench/code_throughput.py [--levels 1 8 32] [--overhead-programs 60]
        [--backends bubblewrap docker podman] [--check-sample 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from envbuilder.environment import load_environment
from envbuilder.isolation.sandbox import (
    Backend,
    BubblewrapBackend,
    DockerBackend,
    Limits,
    default_concurrency,
)

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


def backend_env(name: str) -> dict[str, str]:
    """The environment that selects backend ``name`` (for a server or ``check`` subprocess)."""
    if name == "bubblewrap":
        return {"ENVBUILDER_SANDBOX": "bubblewrap"}
    host = os.environ.get("PODMAN_HOST", "unix:///run/podman/podman.sock") if name == "podman" else None
    env = {"ENVBUILDER_SANDBOX": "docker"}
    if host or os.environ.get("DOCKER_HOST"):
        env["DOCKER_HOST"] = host or os.environ["DOCKER_HOST"]
    return env


def make_backend(name: str) -> Backend:
    if name == "bubblewrap":
        return BubblewrapBackend()
    return DockerBackend(host=backend_env(name).get("DOCKER_HOST"))


async def overhead(progs: list[str], names: list[str]) -> tuple[list[float], dict[str, list[float]]]:
    backends = {name: make_backend(name) for name in names}
    limits = Limits(wall_seconds=30, cpu_seconds=30)
    plain: list[float] = []
    boxed: dict[str, list[float]] = {name: [] for name in names}
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
            for name, backend in backends.items():
                start = time.perf_counter()
                result = await backend.run(["python3", "-I", "main.py"], {"main.py": prog.encode()}, limits)
                assert result.ok, result.describe()
                boxed[name].append(time.perf_counter() - start)
    return plain, boxed


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def check_time(name: str, sample: int) -> tuple[float, str]:
    """Seconds of ``envbuilder check envs/humaneval.yaml --sample N`` on backend ``name``."""
    env = {**os.environ, **backend_env(name)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder", "check", str(SPEC), "--sample", str(sample)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    return seconds, done.stdout.strip().splitlines()[0]


def serve_levels(answers: list[str], levels: list[int], backend: str) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", str(SPEC), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **backend_env(backend)},
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
        print(f"{backend}: sandbox slots: {default_concurrency()}; {os.cpu_count()} cores, load {load:.1f}")
        print("| in flight | graded/s | episode p50 (ms) | p90 (ms) | server CPU per answer (ms) |")
        print("|---|---|---|---|---|")
        for level in levels:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", type=int, nargs="*", default=[1, 8, 32])
    ap.add_argument("--overhead-programs", type=int, default=60)
    names = ["bubblewrap", "docker", "podman"]
    ap.add_argument("--backends", nargs="+", default=["bubblewrap"], choices=names)
    ap.add_argument("--check-sample", type=int, default=0)
    args = ap.parse_args()
    answers, progs = programs()
    if args.levels:
        serve_levels(answers, args.levels, args.backends[0])
    if args.overhead_programs:
        plain, boxed = asyncio.run(overhead(progs[: args.overhead_programs], args.backends))
        n = len(plain)
        print(f"\n{n} HumanEval programs, interleaved program by program; load {os.getloadavg()[0]:.1f}")
        print("| run | p50 (ms) | p99 (ms) | overhead p50 (ms) | overhead p99 (ms) |")
        print("|---|---|---|---|---|")
        p50, p99 = quantile(plain, 0.5), quantile(plain, 0.99)
        print(f"| plain subprocess | {p50 * 1e3:.0f} | {p99 * 1e3:.0f} | | |")
        for name, times in boxed.items():
            extra = [b - p for b, p in zip(times, plain, strict=True)]
            print(
                f"| {name} | {quantile(times, 0.5) * 1e3:.0f} | {quantile(times, 0.99) * 1e3:.0f} "
                f"| +{quantile(extra, 0.5) * 1e3:.0f} | +{quantile(extra, 0.99) * 1e3:.0f} |"
            )
    if args.check_sample:
        print(f"\n`envbuilder check envs/humaneval.yaml --sample {args.check_sample}`")
        print("| backend | wall (s) | result |")
        print("|---|---|---|")
        for name in args.backends:
            seconds, said = check_time(name, args.check_sample)
            print(f"| {name} | {seconds:.1f} | {said.split(': ', 1)[-1]} |", flush=True)


if __name__ == "__main__":
    main()
