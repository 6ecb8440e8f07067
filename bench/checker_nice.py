"""How fast the math grader's checker processes drain a queue of checks on this machine, at their
niceness (``_zygote.NICENESS``, 10) and at 0, in interleaved rounds of one run (issue 37).

Each round grades ``--answers`` math answers that only SymPy decides (a wrong number against a
MATH-500 target that is not a plain number, every answer its own, so no verdict is remembered)
through ``MathGrader.grade`` in this process, ``--concurrency`` at once, with the grading pool's
zygotes reniced first (a child inherits its zygote's niceness; lowering it needs root). The
figures: checks per second, wall time per check (p50/p99) and the load average, per setting.

    sudo python bench/checker_nice.py --rounds 3 --answers 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq

from envbuilder.graders import GraderContext, build_grader
from envbuilder.graders._math import MathGrader, _checker
from envbuilder.isolation.processes import NICENESS
from envbuilder.spec._models import GraderField

ROOT = Path(__file__).resolve().parent.parent


def targets() -> list[str]:
    """MATH-500 targets a plain number is not decided against without SymPy."""
    path = ROOT / "envs" / "data" / "math500" / "test-00000-of-00001.parquet"
    gold = [str(a).strip() for a in pq.read_table(path, columns=["answer"]).column("answer").to_pylist()]
    plain = _checker("latex_and_expr", 6)._plain
    return [t for t in gold if plain("-123456789", t) is None]


def renice(niceness: int) -> int:
    """Set the grading pool's zygotes (this process's children) to ``niceness``; how many."""
    zygotes = [
        p for p in psutil.Process().children() if "_zygote" in " ".join(p.cmdline()) and p.is_running()
    ]
    for p in zygotes:
        p.nice(niceness)
    return len(zygotes)


async def one_round(grader: MathGrader, answers: list[tuple[str, str]], concurrency: int) -> dict[str, Any]:
    gate = asyncio.Semaphore(concurrency)
    took: list[float] = []

    async def grade(answer: str, target: str) -> None:
        async with gate:
            t = time.perf_counter()
            await grader.grade(answer, {"answer": target}, {})
            took.append(time.perf_counter() - t)

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    await asyncio.gather(*(grade(a, t) for a, t in answers))
    wall = time.perf_counter() - t0
    took.sort()
    return {
        "checks": grader.verdicts.runs,
        "checks_per_s": grader.verdicts.runs / wall,
        "p50_ms": 1000 * statistics.median(took),
        "p99_ms": 1000 * took[min(len(took) - 1, int(0.99 * len(took)))],
        "load": f"{load0:.0f} → {os.getloadavg()[0]:.0f}",
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--answers", type=int, default=60)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    pool = targets()
    block = GraderField  # the spec's own validation of a grader block
    from pydantic import TypeAdapter

    config = TypeAdapter(block).validate_python({"type": "math", "target": "{{ answer }}"})
    warm = build_grader(config, GraderContext())
    assert isinstance(warm, MathGrader)
    await warm.grade("\\sqrt{3}", {"answer": "\\sqrt{2}"}, {})  # start the pool's zygotes
    rows: dict[int, list[dict[str, Any]]] = {NICENESS: [], 0: []}
    n = 0
    for rnd in range(args.rounds):
        for niceness in (NICENESS, 0):
            grader = build_grader(config, GraderContext())
            assert isinstance(grader, MathGrader)
            zygotes = renice(niceness)
            answers = [(str(-(10**9) - n - i), pool[(n + i) % len(pool)]) for i in range(args.answers)]
            n += args.answers
            row = await one_round(grader, answers, args.concurrency)
            row["zygotes"] = zygotes
            rows[niceness].append(row)
            print(json.dumps({"round": rnd + 1, "nice": niceness, **row}), flush=True)
    renice(NICENESS)
    for niceness, rs in rows.items():
        print(
            f"nice {niceness}: checks/s "
            + ", ".join(f"{r['checks_per_s']:.2f}" for r in rs)
            + f" (median {statistics.median(r['checks_per_s'] for r in rs):.2f}); p50 ms "
            + ", ".join(f"{r['p50_ms']:.0f}" for r in rs)
            + "; load "
            + ", ".join(r["load"] for r in rs)
        )


if __name__ == "__main__":
    asyncio.run(main())
