"""A/B: envbuilder from another checkout (say `main`) against this one, interleaved rounds, with
``../shared/bench/orsbench.py`` (server pinned to CPU 0, harness to CPU 1). For checking that a
change did not slow the hot path: quote the ratios, the machine drifts between runs.

    python bench/ab.py --baseline /path/to/main/checkout --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [
    "/task req/s c=16", "episodes/s c=8", "episodes/s c=64", "server CPU ms/episode c=8",
    "episode p50 ms c=8", "episode p99 ms c=8",
]  # fmt: skip


def figures(m: dict[str, Any]) -> dict[str, float]:
    micro = {(r["kind"], r["concurrency"]): r for r in m["micro"]}
    eps = {e["concurrency"]: e for e in m["episodes"]}
    return {
        "/task req/s c=16": micro[("task", 16)]["rps"],
        "episodes/s c=8": eps[8]["episodes_per_s"],
        "episodes/s c=64": eps[64]["episodes_per_s"],
        "server CPU ms/episode c=8": eps[8]["server_cpu_ms_per_episode"],
        "episode p50 ms c=8": eps[8]["p50_ms"],
        "episode p99 ms c=8": eps[8]["p99_ms"],
    }


def run(shared: Path, label: str, checkout: Path, args: argparse.Namespace) -> dict[str, float]:
    print(f"[ab] {label}", file=sys.stderr, flush=True)
    port = 8311
    spec = checkout / "envs" / "gsm8k.yaml"
    server = f"env PYTHONPATH={checkout} {sys.executable} -m envbuilder serve {spec} --port {port}"
    argv = [
        sys.executable,
        str(shared / "bench" / "orsbench.py"),
        "--server-cmd",
        server,
        "--url",
        f"http://127.0.0.1:{port}",
        "--env",
        "gsm8k",
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
        "300",
        "--micro-kinds",
        "task",
        "--micro-concurrency",
        "16",
        "--micro-requests",
        str(args.requests),
        "--episodes",
        str(args.episodes),
        "--episode-concurrency",
        "8,64",
        "--tool",
        "submit",
        "--tool-input",
        '{"answer": "0"}',
    ]
    # Run in the checkout: ``python -m envbuilder`` puts the working directory first on sys.path,
    # ahead of PYTHONPATH, so started elsewhere both sides could run the same code.
    out = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=checkout).stdout
    return figures(json.loads(out)["median"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="another envbuilder checkout")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    sides = {"baseline": args.baseline.resolve(), "this checkout": ROOT}
    results: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for round_ in range(args.rounds):
        for label, checkout in sides.items():
            results[label].append(run(args.shared, f"{label} (round {round_ + 1})", checkout, args))
    print(f"Medians of {args.rounds} interleaved round(s); host load {os.getloadavg()[0]:.1f} at the end.\n")
    print("| figure | baseline | this checkout | ratio |\n|---|---|---|---|")
    for name in FIGURES:
        ma = statistics.median(r[name] for r in results["baseline"])
        mb = statistics.median(r[name] for r in results["this checkout"])
        print(f"| {name} | {ma:,.4g} | {mb:,.4g} | {mb / ma:.2f}× |")


if __name__ == "__main__":
    main()
