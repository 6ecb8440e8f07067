#!/usr/bin/env python3
"""envbuilder vs the reference ors-sdk server vs the bare ASGI floor, interleaved, with orsbench.

Each round starts every server afresh, in turn, and runs ``shared/bench/orsbench.py`` against it
(server pinned to CPU 0, harness to CPU 1): `/task` at concurrency 1 and 16, full episodes
(create_session → create → prompt → call submit → delete) at concurrency 1, 8 and 64. With
``--big`` it adds envbuilder on a 10M-row GSM8K-shaped Parquet file (and, unless
``--skip-reference-big``, the reference on it: ~100 s to start and ~7-9 GB of memory).
Writes medians and ratios into bench/README.md between the RESULTS markers.

    python bench/compare.py --ref-python /path/to/ref-venv/bin/python --rounds 3 \\
        --big /tmp/big/gsm8k_10m.parquet

``--ref-python``: the interpreter of a virtualenv made as shared/bench/README.md says
(`pip install ors-sdk pandas pyarrow psutil`); it runs the reference and the bare floor.
envbuilder runs under this interpreter. Make the big file once with
``python ../shared/tools/make_big_parquet.py -o /tmp/big/gsm8k_10m.parquet``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT / "envs" / "data" / "gsm8k"
TRAIN, TEST = GSM8K / "train-00000-of-00001.parquet", GSM8K / "test-00000-of-00001.parquet"
SUBMIT = ["--tool", "submit", "--tool-input", '{"answer": "0"}']


def orsbench(
    shared: Path, label: str, cmd: str, port: int, env: str, extra: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    print(f"[compare] {label}", file=sys.stderr, flush=True)
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
        "600",
        "--micro-kinds",
        "task",
        "--micro-concurrency",
        "1,16",
        "--micro-requests",
        str(args.requests),
        "--episodes",
        str(args.episodes),
        "--episode-concurrency",
        "1,8,64",
        *extra,
    ]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median"]  # type: ignore[no-any-return]


def figures(m: dict[str, Any]) -> dict[str, float]:
    micro = {(r["kind"], r["concurrency"]): r for r in m["micro"]}
    eps = {e["concurrency"]: e for e in m["episodes"]}
    return {
        "cold start s": m["cold_start_s"],
        "RSS MB": m.get("rss_mb_after_episodes") or m["rss_mb_after_startup"],
        "/task p50 ms": micro[("task", 1)]["p50_ms"],
        "/task p99 ms": micro[("task", 1)]["p99_ms"],
        "/task req/s c=16": micro[("task", 16)]["rps"],
        "episodes/s c=8": eps[8]["episodes_per_s"],
        "episodes/s c=64": eps[64]["episodes_per_s"],
        "server CPU ms/episode": eps[8]["server_cpu_ms_per_episode"],
        "episode p50 ms c=8": eps[8]["p50_ms"],
        "episode p99 ms c=8": eps[8]["p99_ms"],
    }


def fmt(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"


def report(results: dict[str, list[dict[str, float]]], rounds: int) -> str:
    med = {
        name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in results.items()
    }
    cols = list(next(iter(med.values())))
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Run {when} on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; server pinned to CPU 0, orsbench to CPU 1; medians of "
        f"{rounds} interleaved round(s).",
        "",
        "| server | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    lines += [f"| {name} | " + " | ".join(fmt(row[c]) for c in cols) + " |" for name, row in med.items()]
    ref, ours = med.get("ors-sdk reference, GSM8K"), med.get("envbuilder, GSM8K")
    if ref and ours:
        lines += [
            "",
            "Ratios, envbuilder / reference on GSM8K: "
            + ", ".join(
                f"{c} {ours[c] / ref[c]:.2f}×"
                for c in (
                    "episodes/s c=8",
                    "episodes/s c=64",
                    "server CPU ms/episode",
                    "episode p99 ms c=8",
                    "/task req/s c=16",
                    "RSS MB",
                )
            ),
        ]
        lines.append(
            f"Tails: envbuilder episode p99/p50 at c=8 = "
            f"{ours['episode p99 ms c=8'] / ours['episode p50 ms c=8']:.2f}; throughput at "
            f"c=64 / c=8 = {ours['episodes/s c=64'] / ours['episodes/s c=8']:.2f}."
        )
    big = med.get("envbuilder, 10M rows")
    if big and ours:
        lines.append(
            "envbuilder on 10M rows / on GSM8K: "
            + ", ".join(
                f"{c} {big[c] / ours[c]:.2f}×"
                for c in ("episodes/s c=8", "server CPU ms/episode", "episode p99 ms c=8", "/task req/s c=16")
            )
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--ref-python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=3000, help="episodes per concurrency level")
    ap.add_argument("--requests", type=int, default=3000, help="/task requests per concurrency level")
    ap.add_argument("--big", type=Path, default=None)
    ap.add_argument("--skip-reference-big", action="store_true")
    ap.add_argument("--no-readme", action="store_true", help="print only; leave bench/README.md")
    args = ap.parse_args()

    shared, ref_py, py = args.shared, args.ref_python, sys.executable
    ref_server = f"{ref_py} {shared}/bench/servers/gsm8k_ors.py --port 8202 --test-data {TEST}"
    ours = f"{py} -m envbuilder serve --host 127.0.0.1 --port 8203"
    servers: list[tuple[str, str, int, str, list[str]]] = [
        (
            "bare ASGI floor",
            f"{ref_py} {shared}/bench/servers/bare_asgi.py --port 8201 --env gsm8k",
            8201,
            "gsm8k",
            [],
        ),
        # The same floor on the event loop and HTTP parser envbuilder installs (uvloop, httptools).
        (
            "bare ASGI floor, uvloop + httptools",
            f"{py} {shared}/bench/servers/bare_asgi.py --port 8201 --env gsm8k",
            8201,
            "gsm8k",
            [],
        ),
        ("ors-sdk reference, GSM8K", f"{ref_server} --data {TRAIN}", 8202, "gsm8kenvironment", []),
        ("envbuilder, GSM8K", f"{ours} {ROOT}/envs/gsm8k.yaml", 8203, "gsm8k", SUBMIT),
    ]
    if args.big is not None:
        spec = Path(tempfile.mkdtemp()) / "big.yaml"
        spec.write_text(
            (ROOT / "envs" / "gsm8k.yaml")
            .read_text()
            .replace("data/gsm8k/train-00000-of-00001.parquet", str(args.big.resolve()))
            .replace("data/gsm8k/test-00000-of-00001.parquet", str(TEST))
        )
        servers.append(("envbuilder, 10M rows", f"{ours} {spec}", 8203, "gsm8k", SUBMIT))
        if not args.skip_reference_big:
            servers.append(
                (
                    "ors-sdk reference, 10M rows",
                    f"{ref_server} --data {args.big}",
                    8202,
                    "gsm8kenvironment",
                    [],
                )
            )
    results: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in servers}
    for round_ in range(args.rounds):
        for name, cmd, port, env, extra in servers:
            if name == "ors-sdk reference, 10M rows" and round_ > 0:
                continue  # minutes to start and most of the machine's memory: once is enough
            results[name].append(
                figures(orsbench(shared, f"{name} (round {round_ + 1})", cmd, port, env, extra, args))
            )
    text = report(results, args.rounds)
    print(text)
    if not args.no_readme:
        readme = Path(__file__).with_name("README.md")
        start, end = "<!-- RESULTS -->", "<!-- /RESULTS -->"
        head, rest = readme.read_text().split(start, 1)
        readme.write_text(head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    main()
