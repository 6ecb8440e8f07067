"""JSON Lines at scale: the one-time conversion to the Arrow row file, then lazy reads.

Writes a JSONL file of ``--rows`` GSM8K-shaped rows, then, each in a fresh process so peak memory
is its own, interleaved over ``--rounds``:

* ``stream``: envbuilder's first open (the conversion, a 4 MB block at a time), its peak RSS;
* ``whole``: what the conversion did before, ``pyarrow.json.read_json`` of the whole file;
* ``reopen``: a second open (the cached row file) and 1,000 random task reads.

``--numbers`` gives each row a float and a list of integers too (the conversion then looks for
floats of 2^63 or more, which may be integers over 64 bits); ``--old DIR`` converts with the
envbuilder checked out in DIR too (``git worktree add DIR <commit>``), interleaved, so a change
is compared with the commit before it in the same run.

    python bench/text_formats.py --rows 3000000 --rounds 3
    python bench/text_formats.py --rows 1000000 --numbers --old /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, random, resource, sys, time
mode, folder, cache = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["ENVBUILDER_CACHE_DIR"] = cache
from envbuilder.environment import Environment
from envbuilder.spec import parse_spec
spec = parse_spec(
    "name: big\ndataset: {type: jsonl, files: {train: rows.jsonl}}\nsplits: {train: {}}\n"
    "prompt: {template: '{{ question }}'}\ngrader: {type: exact_match, target: '{{ answer }}'}\n",
    file="big.yaml", base_dir=folder)
started = time.perf_counter()
if mode == "whole":  # the same imports as the other modes, so peak memory compares
    import pyarrow.json as pj
    rows = pj.read_json(os.path.join(folder, "rows.jsonl")).num_rows
    reads = 0.0
else:
    env = Environment(spec)
    split = env.split("train")
    rows = len(split)
    opened = time.perf_counter() - started
    rng = random.Random(0)
    t = time.perf_counter()
    for _ in range(1000):
        split.task(rng.randrange(rows))
    reads = time.perf_counter() - t
seconds = time.perf_counter() - started if mode == "whole" else opened
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rows": rows, "seconds": seconds, "peak_mb": peak, "reads_ms": reads * 1000}))
"""


def write_rows(path: Path, n: int, numbers: bool = False) -> None:
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            a, b = rng.randrange(1, 1000), rng.randrange(1, 1000)
            row = {
                "id": i,
                "question": f"Sam has {a} apples and buys {b} more. How many apples does Sam have now?",
                "answer": f"Sam has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}",
            }
            if numbers:
                row |= {"difficulty": a / 7, "steps": [a, b, a + b]}
            f.write(json.dumps(row) + "\n")


def run(mode: str, folder: Path, cache: Path, tree: str | None = None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree} if tree else None
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(folder), str(cache)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--numbers", action="store_true", help="rows with a float and a list of integers")
    parser.add_argument("--old", help="a checkout of another commit to convert with too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_rows(folder / "rows.jsonl", args.rows, args.numbers)
        size = (folder / "rows.jsonl").stat().st_size
        results: dict[str, list[dict[str, float]]] = {"stream": [], "whole": [], "reopen": []}
        if args.old:
            results["old"] = []
        for r in range(args.rounds):
            cache = folder / f"cache{r}"
            if args.old:
                results["old"].append(run("stream", folder, folder / f"old{r}", args.old))
            results["stream"].append(run("stream", folder, cache))
            results["whole"].append(run("whole", folder, cache))
            results["reopen"].append(run("reopen", folder, cache))
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in results.items()}
    print(
        f"{args.rows:,} rows, {size / 2**20:,.0f} MiB of JSONL; medians of {args.rounds} interleaved"
        f" rounds, {os.cpu_count()} cores\n"
    )
    print("| step | seconds | peak RSS MB | 1,000 random task reads ms |\n|---|---|---|---|")
    print(
        f"| first open: streamed conversion to the row file | {med['stream']['seconds']:.2f} "
        f"| {med['stream']['peak_mb']:,.0f} | {med['stream']['reads_ms']:.0f} |"
    )
    if args.old:
        print(
            f"| the same, with {args.old} | {med['old']['seconds']:.2f} "
            f"| {med['old']['peak_mb']:,.0f} | {med['old']['reads_ms']:.0f} |"
        )
    print(
        f"| (before: `read_json` of the whole file, no reads) | {med['whole']['seconds']:.2f} "
        f"| {med['whole']['peak_mb']:,.0f} | — |"
    )
    print(
        f"| second open: the cached row file | {med['reopen']['seconds']:.3f} "
        f"| {med['reopen']['peak_mb']:,.0f} | {med['reopen']['reads_ms']:.0f} |"
    )
    print(f"\nPeak memory, streamed / whole file: {med['stream']['peak_mb'] / med['whole']['peak_mb']:.2f}×")


if __name__ == "__main__":
    main()
