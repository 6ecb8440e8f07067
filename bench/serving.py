#!/usr/bin/env python3
"""Serving speed: envbuilder vs the reference ors-sdk server vs the bare ASGI floor, interleaved.

Runs ``shared/bench/orsbench.py`` against each server in turn, ``--repeat`` rounds, every
round starting each server afresh (server pinned to CPU 0, harness to CPU 1), and prints a
Markdown table of medians and ratios (``--readme`` also writes it into bench/README.md).

    python bench/serving.py --ref-python /path/to/ref-venv/bin/python --repeat 3
    python bench/serving.py --big /tmp/big/gsm8k_10m.parquet     # adds envbuilder on 10M rows

The reference runs under ``--ref-python``: a virtualenv made as shared/bench/README.md says
(`pip install ors-sdk pandas pyarrow psutil`). envbuilder runs under this interpreter.
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


def orsbench(shared: Path, label: str, cmd: str, port: int, env: str, args: argparse.Namespace,
             extra: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(shared / "bench" / "orsbench.py"), "--server-cmd", cmd,
         "--url", f"http://127.0.0.1:{port}", "--env", env, "--split", "train", "--repeat", "1",
         "--server-cpus", "0", "--client-cpus", "1", "--micro-kinds", "task",
         "--micro-concurrency", "1,16", "--micro-requests", str(args.micro_requests),
         "--episodes", str(args.episodes), "--episode-concurrency", "1,8,64",
         "--label", label, *extra],
        capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["median"]  # type: ignore[no-any-return]


def summarise(run: dict[str, Any]) -> dict[str, float]:
    eps = {e["concurrency"]: e for e in run["episodes"]}
    task = {m["concurrency"]: m for m in run["micro"] if m["kind"] == "task"}
    return {
        "cold_s": run["cold_start_s"],
        "rss_mb": run.get("rss_mb_after_episodes") or run.get("rss_mb_after_startup") or 0.0,
        "eps8": eps[8]["eps"] if "eps" in eps[8] else eps[8]["episodes_per_s"],
        "eps64": eps[64]["eps"] if "eps" in eps[64] else eps[64]["episodes_per_s"],
        "cpu_ms": eps[8]["server_cpu_ms_per_episode"],
        "p50_8": eps[8]["p50_ms"],
        "p99_8": eps[8]["p99_ms"],
        "task_p50": task[1]["p50_ms"],
        "task_rps16": task[16]["rps"],
    }


def median_of(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def table(results: dict[str, dict[str, float]], ref: str) -> str:
    head = ("| server | cold start s | RSS MB | episodes/s c=8 | c=64 | CPU ms/episode | "
            "episode p50 / p99 ms (c=8) | `/task` p50 ms | `/task` req/s c=16 | vs reference c=8 |")
    lines = [head, "|" + "---|" * 10]
    base = results[ref]["eps8"]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['cold_s']:.2f} | {r['rss_mb']:.0f} | {r['eps8']:.0f} | {r['eps64']:.0f} | "
            f"{r['cpu_ms']:.2f} | {r['p50_8']:.1f} / {r['p99_8']:.1f} | {r['task_p50']:.2f} | "
            f"{r['task_rps16']:.0f} | {r['eps8'] / base:.2f}× |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--ref-python", default=sys.executable,
                    help="python of a virtualenv with ors-sdk, pandas, pyarrow (the reference as published)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--micro-requests", type=int, default=2000)
    ap.add_argument("--big", type=Path, default=None, help="a 10M-row GSM8K-shaped Parquet file")
    ap.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    ap.add_argument("--json", type=Path, default=None, help="write all runs here")
    args = ap.parse_args()

    data = ROOT / "envs" / "data" / "gsm8k"
    train, test = data / "train-00000-of-00001.parquet", data / "test-00000-of-00001.parquet"
    servers: list[tuple[str, str, int, str, list[str]]] = [
        ("bare ASGI floor", f"{args.ref_python} {args.shared}/bench/servers/bare_asgi.py --port 8201 "
         "--env gsm8k", 8201, "gsm8k", []),
        ("ors-sdk reference", f"{args.ref_python} {args.shared}/bench/servers/gsm8k_ors.py --data {train} "
         f"--test-data {test} --port 8202", 8202, "gsm8kenvironment", []),
        ("envbuilder", f"{sys.executable} -m envbuilder serve {ROOT}/envs/gsm8k.yaml --host 127.0.0.1 "
         "--port 8203", 8203, "gsm8k", ["--tool", "submit", "--tool-input", '{"answer": "0"}']),
    ]
    tmp = Path(tempfile.mkdtemp())
    if args.big is not None:
        spec = tmp / "big.yaml"
        spec.write_text((ROOT / "envs" / "gsm8k.yaml").read_text().replace(
            "data/gsm8k/train-00000-of-00001.parquet", str(args.big.resolve())).replace(
            "data/gsm8k/test-00000-of-00001.parquet", str(test)).replace(
            "prompts/math_final_answer.jinja", str(ROOT / "templates/prompts/math_final_answer.jinja")))
        servers.append(("envbuilder, 10M rows", f"{sys.executable} -m envbuilder serve {spec} "
                        "--host 127.0.0.1 --port 8204", 8204, "gsm8k",
                        ["--tool", "submit", "--tool-input", '{"answer": "0"}']))
    runs: dict[str, list[dict[str, Any]]] = {s[0]: [] for s in servers}
    for round_ in range(args.repeat):
        for name, cmd, port, env, extra in servers:
            print(f"[serving] round {round_ + 1}/{args.repeat}: {name}", file=sys.stderr, flush=True)
            runs[name].append(orsbench(args.shared, name, cmd, port, env, args, extra))
    results = {name: median_of([summarise(r) for r in rs]) for name, rs in runs.items()}
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    text = (f"Measured {when} on {machine}; medians of {args.repeat} interleaved rounds, "
            "server pinned to CPU 0, harness to CPU 1.\n\n" + table(results, "ors-sdk reference"))
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "runs": runs}, indent=1))
    if args.readme:
        readme = ROOT / "bench" / "README.md"
        start, end = "<!-- serving:start -->", "<!-- serving:end -->"
        current = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{start}\n{end}\n"
        if start not in current:
            current += f"\n{start}\n{end}\n"
        before, rest = current.split(start, 1)
        after = rest.split(end, 1)[1]
        readme.write_text(f"{before}{start}\n{text}\n{end}{after}")


if __name__ == "__main__":
    main()
