"""envbuilder vs. the reference ors-sdk server, interleaved, with ../shared/bench/orsbench.py.

Runs orsbench on GSM8K train (7,473 rows) and on 10M GSM8K-shaped rows, alternating the two
servers within each round, and writes the medians and ratios into bench/README.md (between
the RESULTS markers). Needs pandas in the venv (the reference server loads Parquet with it).

    python bench/compare.py --big /tmp/big/gsm8k_10m.parquet [--rounds 1] [--skip-reference-10m]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = next(p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir())
ORSBENCH = SHARED / "bench" / "orsbench.py"
REFERENCE = SHARED / "bench" / "servers" / "gsm8k_ors.py"
GSM8K = ROOT / "envs" / "data" / "gsm8k"

SPEC = """name: big
dataset: {{type: parquet, files: {{train: {train}, test: {test}}}}}
splits: {{train: {{type: train}}, test: {{type: test}}}}
prompt: {{template_file: prompts/math_final_answer.jinja}}
grader: {{type: exact_match, target: "{{{{ answer.split('####')[-1] }}}}", extract: number}}
"""


def orsbench(label: str, cmd: str, port: int, env: str, extra: list[str]) -> dict:
    argv = [sys.executable, str(ORSBENCH), "--server-cmd", cmd, "--url", f"http://127.0.0.1:{port}",
            "--env", env, "--split", "train", "--repeat", "1", "--label", label,
            "--server-cpus", "0", "--client-cpus", "1", "--startup-timeout", "300",
            "--micro-concurrency", "1,16", "--episode-concurrency", "8", *extra]
    print(f"== {label}", file=sys.stderr, flush=True)
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median"]


def figures(m: dict) -> dict:
    micro = {(r["kind"], r["concurrency"]): r for r in m.get("micro", [])}
    eps = (m.get("episodes") or [{}])[0]
    task1, task16 = micro.get(("task", 1), {}), micro.get(("task", 16), {})
    return {"cold start s": m.get("cold_start_s"), "RSS MB": m.get("rss_mb_after_episodes"),
            "/task p50 ms": task1.get("p50_ms"), "/task p99 ms": task1.get("p99_ms"),
            "/task req/s c=16": task16.get("rps"), "episodes/s c=8": eps.get("episodes_per_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--big", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip-reference-10m", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    bin_dir = Path(py).parent
    work = Path(tempfile.mkdtemp())
    big_spec = work / "big.yaml"
    big_spec.write_text(SPEC.format(train=args.big, test=GSM8K / "test-00000-of-00001.parquet"))
    test = GSM8K / "test-00000-of-00001.parquet"
    cases = {
        "gsm8k 7,473": (GSM8K / "train-00000-of-00001.parquet", ROOT / "envs" / "gsm8k.yaml", "gsm8k"),
        "10M rows": (args.big, big_spec, "big"),
    }
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for case, (train, spec, env) in cases.items():
            if not (case == "10M rows" and args.skip_reference_10m):
                ref = f"{py} {REFERENCE} --data {train} --test-data {test} --port 8101"
                results.setdefault((case, "reference"), []).append(
                    figures(orsbench(f"ref {case}", ref, 8101, "gsm8kenvironment", [])))
            ours = f"{bin_dir / 'envbuilder'} serve {shlex.quote(str(spec))} --port 8102 --host 127.0.0.1"
            results.setdefault((case, "envbuilder"), []).append(figures(orsbench(
                f"envbuilder {case}", ours, 8102, env,
                ["--tool", "submit", "--tool-input", '{"answer":"0"}'])))
    write_readme(results)


def write_readme(results: dict[tuple[str, str], list[dict]]) -> None:
    cols = list(next(iter(results.values()))[0])
    med = {k: {c: _median([r[c] for r in v]) for c in cols} for k, v in results.items()}
    lines = [f"Run {dt.datetime.now():%Y-%m-%d %H:%M}, {platform.node()} ({os.cpu_count()} cores, "
             f"Python {platform.python_version()}); server pinned to CPU 0, client to CPU 1; medians of "
             f"{len(next(iter(results.values())))} round(s).", "",
             "| data | server | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for (case, server), row in med.items():
        lines.append(f"| {case} | {server} | " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    lines += ["", "| data | envbuilder / reference | " + " | ".join(cols) + " |",
              "|---|---|" + "---|" * len(cols)]
    for case in dict.fromkeys(c for c, _ in med):
        ref, ours = med.get((case, "reference")), med.get((case, "envbuilder"))
        if ref and ours:
            ratios = [_fmt(ours[c] / ref[c]) if ours[c] and ref[c] else "–" for c in cols]
            lines.append(f"| {case} | ratio | " + " | ".join(ratios) + " |")
    readme = Path(__file__).with_name("README.md")
    text = readme.read_text()
    start, end = "<!-- RESULTS -->", "<!-- /RESULTS -->"
    head, rest = text.split(start, 1)
    readme.write_text(head + start + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])
    print("\n".join(lines))


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:,.3g}" if v < 100 else f"{v:,.0f}"


if __name__ == "__main__":
    main()
