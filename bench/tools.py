#!/usr/bin/env python3
"""Tools and plain submit, before and after the tools work, interleaved, with orsbench.

Each round starts every server afresh, in turn, and runs ``shared/bench/orsbench.py`` episodes
(create_session → create → prompt → call → delete) at concurrency 1 and 8, server pinned to
CPU 0 and the harness to CPU 1:

* ``before``: envbuilder at ``--before`` (a git revision; default the commit this branch started
  from), extracted with ``git archive`` and serving envs/gsm8k.yaml, the call a ``submit``;
* ``after``: this checkout serving envs/gsm8k.yaml, the call a ``submit``;
* ``after, tool env, submit``: envs/gsm8k_tools.yaml, the call a ``submit``;
* ``after, tool env, calculator``: envs/gsm8k_tools.yaml, the call ``calculator``.

    python bench/tools.py --shared /work/shared --rounds 3 --episodes 2000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "67d2d55"
"""The commit the tools branch started from."""
COLS = (
    "episodes/s c=8",
    "server CPU ms/episode",
    "call p50 ms c=8",
    "episode p50 ms c=8",
    "episode p99 ms c=8",
)


def orsbench(shared: Path, label: str, cmd: str, port: int, env: str, extra: list[str], episodes: int) -> Any:
    print(f"[tools] {label}", file=sys.stderr, flush=True)
    argv = [
        sys.executable,
        str(shared / "bench" / "orsbench.py"),
        "--server-cmd",
        cmd,
        "--url",
        f"http://127.0.0.1:{port}",
        "--env",
        env,
        "--split",
        "train",
        "--repeat",
        "1",
        "--label",
        label,
        "--server-cpus",
        "0",
        "--client-cpus",
        "1",
        "--startup-timeout",
        "120",
        "--micro-kinds",
        "task",
        "--micro-concurrency",
        "1",
        "--micro-requests",
        "200",
        "--episodes",
        str(episodes),
        "--episode-concurrency",
        "1,8",
        *extra,
    ]
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)["median"]


def figures(m: dict[str, Any]) -> dict[str, float]:
    eps = {e["concurrency"]: e for e in m["episodes"]}
    steps = eps[8].get("steps") or {}
    call = steps.get("call") or {}
    return {
        "episodes/s c=8": eps[8]["episodes_per_s"],
        "server CPU ms/episode": eps[8]["server_cpu_ms_per_episode"],
        "call p50 ms c=8": call.get("p50_ms", float("nan")),
        "episode p50 ms c=8": eps[8]["p50_ms"],
        "episode p99 ms c=8": eps[8]["p99_ms"],
    }


INPROC = """
import asyncio, json, sys, time
from envbuilder.environment import load_environment
from envbuilder.episode import Episode

spec, name, args, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
env = load_environment(spec)
task = env.split("train").task(0)

async def main():
    for _ in range(500):  # warm up
        await env.call_tool(Episode(task=task), name, args)
    start = time.process_time()
    for _ in range(n):
        await env.call_tool(Episode(task=task), name, args)
    return (time.process_time() - start) / n * 1e6

print(asyncio.run(main()))
"""


def inproc(root: Path, spec: str, name: str, args: dict[str, Any], n: int) -> float:
    """CPU microseconds per call of ``env.call_tool`` (a fresh episode each), in a fresh process."""
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", INPROC, str(root / spec), name, json.dumps(args), str(n)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    ).stdout
    return float(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--before", default=BASE, help="the git revision measured as `before`")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=2000, help="episodes per concurrency level")
    ap.add_argument(
        "--inproc",
        type=int,
        default=0,
        metavar="N",
        help="instead: CPU µs per call in process, N calls per round (no HTTP, no orsbench)",
    )
    args = ap.parse_args()

    old = Path(tempfile.mkdtemp(prefix="envbuilder-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.before], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    if args.inproc:
        return _inproc_table(old, args)
    py = sys.executable
    submit = ["--tool", "submit", "--tool-input", '{"answer": "0"}']
    calc = ["--tool", "calculator", "--tool-input", '{"expression": "(48 / 2) * 3 + 1"}']
    servers = [
        (
            "before, gsm8k, submit",
            f"env PYTHONPATH={old} {py} -m envbuilder serve --port 8301 {old}/envs/gsm8k.yaml",
            8301,
            "gsm8k",
            submit,
        ),
        (
            "after, gsm8k, submit",
            f"{py} -m envbuilder serve --port 8302 {ROOT}/envs/gsm8k.yaml",
            8302,
            "gsm8k",
            submit,
        ),
        (
            "after, gsm8k-tools, submit",
            f"{py} -m envbuilder serve --port 8303 {ROOT}/envs/gsm8k_tools.yaml",
            8303,
            "gsm8k-tools",
            submit,
        ),
        (
            "after, gsm8k-tools, calculator",
            f"{py} -m envbuilder serve --port 8304 {ROOT}/envs/gsm8k_tools.yaml",
            8304,
            "gsm8k-tools",
            calc,
        ),
    ]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in servers}
    try:
        for round_ in range(args.rounds):
            for name, cmd, port, env, extra in servers:
                label = f"{name} (round {round_ + 1})"
                results[name].append(
                    figures(orsbench(args.shared, label, cmd, port, env, extra, args.episodes))
                )
    finally:
        shutil.rmtree(old, ignore_errors=True)
    med = {name: {c: statistics.median(r[c] for r in runs) for c in COLS} for name, runs in results.items()}
    print("| server | " + " | ".join(COLS) + " |")
    print("|---|" + "---|" * len(COLS))
    for name, row in med.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:,.3g}" for c in COLS) + " |")
    before, after = med["before, gsm8k, submit"], med["after, gsm8k, submit"]
    calc_row, tool_submit = med["after, gsm8k-tools, calculator"], med["after, gsm8k-tools, submit"]
    print()
    print("after / before (plain submit): " + ", ".join(f"{c} {after[c] / before[c]:.2f}×" for c in COLS))
    print(
        "calculator / submit (same env): "
        + ", ".join(f"{c} {calc_row[c] / tool_submit[c]:.2f}×" for c in COLS)
    )
    print(
        "Per-round server CPU ms/episode: "
        + json.dumps({n: [round(r["server CPU ms/episode"], 3) for r in runs] for n, runs in results.items()})
    )


def _inproc_table(old: Path, args: argparse.Namespace) -> None:
    submit, calc = {"answer": "0"}, {"expression": "(48 / 2) * 3 + 1"}
    cases = [
        ("before, gsm8k, submit", old, "envs/gsm8k.yaml", "submit", submit),
        ("after, gsm8k, submit", ROOT, "envs/gsm8k.yaml", "submit", submit),
        ("after, gsm8k-tools, submit", ROOT, "envs/gsm8k_tools.yaml", "submit", submit),
        ("after, gsm8k-tools, calculator", ROOT, "envs/gsm8k_tools.yaml", "calculator", calc),
        ("after, gsm8k-tools, hint (template)", ROOT, "envs/gsm8k_tools.yaml", "hint", {}),
    ]
    runs: dict[str, list[float]] = {label: [] for label, *_ in cases}
    try:
        for round_ in range(args.rounds):
            for label, root, spec, name, tool_input in cases:
                print(f"[tools] in process: {label} (round {round_ + 1})", file=sys.stderr, flush=True)
                runs[label].append(inproc(root, spec, name, tool_input, args.inproc))
    finally:
        shutil.rmtree(old, ignore_errors=True)
    print("| call | CPU µs per call (median) | rounds |")
    print("|---|---|---|")
    for label, values in runs.items():
        print(f"| {label} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")


if __name__ == "__main__":
    main()
