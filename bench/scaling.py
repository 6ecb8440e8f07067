#!/usr/bin/env python3
"""Scale-out: the Redis session store against the in-memory one, and 1…N workers on Redis.

Each round starts every configuration afresh, in turn (interleaved, so machine drift touches
all alike), and runs ``shared/bench/orsbench.py`` full GSM8K episodes (create_session → create
→ prompt → call submit → delete) against it:

* ``memory ×1``: ``envbuilder serve`` as shipped, one process, sessions in its memory;
* ``redis ×N`` for each N of ``--workers``: ``serve --store redis://… --workers N``;

each with the ``exact_match`` grader (``envs/gsm8k.yaml``) and the ``math`` grader (the same
spec graded by math-verify). Server CPU counts the whole process tree plus redis-server.
Prints a markdown table (medians over rounds) and the ratios the issue asks for.

    python bench/scaling.py --workers 1,2 --rounds 3 --concurrency 8,64
    python bench/scaling.py --workers 1,2,4,8 --rounds 3     # on a machine with the cores

Needs ``redis-server`` on PATH (a fresh one is started on a free port) unless ``--redis URL``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT / "envs" / "gsm8k.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def math_spec(tmp: Path) -> Path:
    """envs/gsm8k.yaml graded by the ``math`` grader (data paths made absolute)."""
    text = GSM8K.read_text().replace("data/gsm8k/", str(ROOT / "envs" / "data" / "gsm8k") + "/")
    text = text.replace("  extract: number\n", "").replace("type: exact_match", "type: math")
    text = text.split("\ntests:")[0] + "\n"
    path = tmp / "gsm8k_math.yaml"
    path.write_text(text.replace("prompts/math_final_answer.jinja", "prompts/math_final_answer.jinja"))
    return path


@contextlib.contextmanager
def redis_server(url: str | None) -> Iterator[tuple[str, psutil.Process | None]]:
    if url:
        yield url, None
        return
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="scaling-redis-")
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tmp,
        ],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    try:
        yield f"redis://127.0.0.1:{port}/0", psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def tree_cpu(root: psutil.Process, extra: psutil.Process | None) -> float:
    """CPU seconds of ``root``, its live children and ``extra`` (children that died are lost)."""
    total = 0.0
    for p in [root, *root.children(recursive=True), *([extra] if extra else [])]:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


@contextlib.contextmanager
def serve(
    spec: Path, store: str, workers: int, code: Path | None = None
) -> Iterator[tuple[str, psutil.Process]]:
    """``envbuilder serve`` (from ``code``, a checkout of another commit, when given)."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "envbuilder",
        "serve",
        str(spec),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--store",
        store,
        "--workers",
        str(workers),
    ]
    # The math spec is written outside envs/ but reads its data: let the server read envs/.
    env = {**os.environ, "ENVBUILDER_DATA_ROOTS": str(ROOT / "envs")}
    if code:
        env["PYTHONPATH"] = str(code)
    if code:
        cmd = cmd[:-4]  # an older commit has no --store/--workers: its in-memory default
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200 and len(psutil.Process(proc.pid).children()) >= (
                    workers if workers > 1 else 0
                ):
                    break
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"server did not start: {cmd}")
        time.sleep(0.2)
    time.sleep(1.0 if workers > 1 else 0.2)  # let every worker finish starting
    try:
        yield url, psutil.Process(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def orsbench(shared: Path, url: str, concurrency: list[int], episodes: int) -> list[dict[str, Any]]:
    argv = [
        sys.executable,
        str(shared / "bench" / "orsbench.py"),
        "--url",
        url,
        "--env",
        "gsm8k",
        "--split",
        "train",
        "--repeat",
        "1",
        "--micro-kinds",
        "",
        "--micro-concurrency",
        "",
        "--episodes",
        str(episodes),
        "--episode-concurrency",
        ",".join(map(str, concurrency)),
        "--tool",
        "submit",
        "--tool-input",
        '{"answer": "0"}',
    ]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median"]["episodes"]  # type: ignore[no-any-return]


def machine_busy() -> float:
    """The load average over the last minute, per core."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2", help="worker counts on Redis, e.g. 1,2,4,8")
    ap.add_argument("--concurrency", default="8,64", help="episode concurrency levels")
    ap.add_argument("--graders", default="exact_match,math")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=2000, help="episodes per concurrency level")
    ap.add_argument("--redis", default=None, help="use this Redis (default: start one)")
    ap.add_argument("--no-memory", action="store_true", help="skip the in-memory baseline")
    ap.add_argument(
        "--base",
        default=None,
        help="also serve in memory from this git commit (e.g. main): did the default path slow down?",
    )
    default_shared = next(
        (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()), None
    )
    ap.add_argument("--shared", type=Path, default=default_shared, help="the shared folder (orsbench)")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    conc = [int(c) for c in args.concurrency.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="scaling-"))
    specs = {"exact_match": GSM8K, "math": math_spec(tmp)}
    configs = [(g, "memory", 1) for g in args.graders.split(",") if not args.no_memory]
    base = None
    if args.base:
        base = tmp / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        configs = [(g, f"memory@{args.base}", 1) for g in args.graders.split(",")] + configs
    configs += [(g, "redis", w) for g in args.graders.split(",") for w in workers]
    rows: dict[tuple[str, str, int], list[dict[str, float]]] = {c: [] for c in configs}
    loads = []
    with redis_server(args.redis) as (redis_url, redis_proc):
        for rnd in range(args.rounds):
            for grader, store, n in configs:
                print(f"[scaling] round {rnd + 1}: {grader} {store} x{n}", file=sys.stderr, flush=True)
                loads.append(machine_busy())
                load_start = os.getloadavg()[0]
                code = base if store.startswith("memory@") else None
                with serve(specs[grader], redis_url if store == "redis" else "memory", n, code) as (
                    url,
                    proc,
                ):
                    before = tree_cpu(proc, redis_proc if store == "redis" else None)
                    eps = orsbench(args.shared, url, conc, args.episodes)
                    cpu = tree_cpu(proc, redis_proc if store == "redis" else None) - before
                done = sum(e["n"] for e in eps)
                row = {"cpu ms/episode": 1000 * cpu / max(done, 1)}
                # The machine's load (1 min) as this configuration started and ended: each figure's own.
                row["load start"], row["load end"] = load_start, os.getloadavg()[0]
                for e in eps:
                    c = e["concurrency"]
                    row[f"episodes/s c={c}"] = e["episodes_per_s"]
                    row[f"p50 ms c={c}"] = e["p50_ms"]
                    row[f"p99 ms c={c}"] = e["p99_ms"]
                    row[f"errors c={c}"] = e["errors"]
                rows[(grader, store, n)].append(row)
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in rows.items()}
    cols = list(next(iter(med.values())))
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"Run {when} on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"medians of {args.rounds} interleaved round(s), {args.episodes} episodes per level; load average "
        f"per core during the run {min(loads):.1f}–{max(loads):.1f}.\n"
    )
    print("| grader | store | workers | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for (grader, store, n), m in med.items():
        cells = [f"{m[c]:,.3g}" if abs(m[c]) < 100 else f"{m[c]:,.0f}" for c in cols]
        print(f"| {grader} | {store} | {n} | " + " | ".join(cells) + " |")
    print()
    for grader in args.graders.split(","):
        for c in conc:
            key = f"episodes/s c={c}"
            if args.base and (grader, f"memory@{args.base}", 1) in med and (grader, "memory", 1) in med:
                ratio = med[(grader, "memory", 1)][key] / med[(grader, f"memory@{args.base}", 1)][key]
                print(f"{grader}: memory x1 / memory x1 at {args.base} at c={c}: {ratio:.2f}x")
            if (grader, "memory", 1) in med and (grader, "redis", 1) in med:
                ratio = med[(grader, "redis", 1)][key] / med[(grader, "memory", 1)][key]
                print(f"{grader}: redis x1 / memory x1 at c={c}: {ratio:.2f}x")
            one = med.get((grader, "redis", 1))
            for n in workers:
                if n > 1 and one and (grader, "redis", n) in med:
                    eff = med[(grader, "redis", n)][key] / (n * one[key])
                    print(
                        f"{grader}: {n} workers at c={c}: {med[(grader, 'redis', n)][key] / one[key]:.2f}x "
                        f"of 1 worker, efficiency {eff:.2f}"
                    )


if __name__ == "__main__":
    main()
