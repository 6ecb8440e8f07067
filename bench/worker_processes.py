"""Grades per second of the graders whose checks run in worker processes.

    python bench/worker_processes.py [--seconds 20] [--concurrency 2]

reasoning_gym on countdown (its checker evaluates the answer with SymPy: a confined process)
and on chain_sum (a string comparison, in the same confined processes), and math on answers only
SymPy can decide (a grading process), each graded ``--concurrency`` at a time for ``--seconds``
after a warm-up. The figure is what one server process sustains; run it against another tree
(``PYTHONPATH=/other/tree``) to compare. Workers: ``$ENVBUILDER_GRADING_PROCESSES``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envbuilder.environment import Environment
from envbuilder.spec import parse_spec

RG = """\
name: rg
dataset:
  type: reasoning_gym
  num_tasks: 10000
  seed: 5
  tasks: {family: {}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: reasoning_gym, timeout: 60}  # room for a cold start on a loaded machine
"""
MATH = {"type": "math", "target": "{{ answer }}", "timeout": 60}


# Only SymPy can tell these equal to their targets (or not): every one goes to a process. Each
# grade gets answers it has not seen (n varies): math-verify caches by answer text.
def math_cases(count: int = 2000) -> list[tuple[dict[str, Any], str]]:
    out = []
    for n in range(2, count // 4 + 2):
        out += [
            ({"answer": f"\\frac{{{14 * n}}}{{{3 * n}}}"}, f"${4 * n}\\frac{{{2 * n}}}{{{3 * n}}}$"),
            ({"answer": f"\\sqrt{{{17 * n * n}}}"}, f"${n}\\sqrt{{17}}$ units"),
            ({"answer": f"({n}, \\frac{{\\pi}}{{2}})"}, f"$({n}, \\pi/2)$"),
            ({"answer": f"x^2 - {n * n}"}, f"$(x-{n})(x+{n})$"),
        ]
    return out


def _env(family: str) -> Environment:
    text = RG.replace("family", family)
    return Environment(parse_spec(text, file=f"{family}.yaml", base_dir=Path.cwd()))


async def _rate(
    grade: Any, cases: list[tuple[dict[str, Any], str]], seconds: float, concurrency: int
) -> dict:
    for _ in range(2):  # warm: every process started, datasets built, imports done
        await asyncio.gather(*(grade(answer, task) for task, answer in cases[:concurrency]))
    done, outcomes = 0, {}
    started = time.perf_counter()

    async def worker(offset: int) -> None:
        nonlocal done
        i = offset
        while time.perf_counter() - started < seconds:
            task, answer = cases[i % len(cases)]
            outcome = (await grade(answer, task)).outcome.value
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            done += 1
            i += concurrency

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "grades_per_s": round(done / elapsed, 1),
        "ms_each": round(1000 * elapsed * concurrency / done, 1),
        "outcomes": outcomes,
    }


async def main(seconds: float, concurrency: int, only: str = "countdown,chain_sum,math") -> dict[str, Any]:
    from pydantic import TypeAdapter

    from envbuilder.graders import GraderContext, build_grader
    from envbuilder.spec._models import GraderField

    out: dict[str, Any] = {}
    for family in [f for f in ("countdown", "chain_sum") if f in only]:
        env = _env(family)
        tasks = env.split("test").task_range(0, 50)
        grader = env.submit.grader  # type: ignore[union-attr]
        cases = [(t, str(t["answer"]) if i % 2 == 0 else "1 + 1") for i, t in enumerate(tasks)]
        out[f"reasoning_gym {family}"] = await _rate(
            lambda a, t, g=grader: g.grade(a, t, {}), cases, seconds, concurrency
        )
    if "math" not in only:
        return out
    math = build_grader(TypeAdapter(GraderField).validate_python(MATH), GraderContext())
    out["math (SymPy in a process)"] = await _rate(
        lambda a, t: math.grade(a, t, {}), math_cases(), seconds, concurrency
    )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--only", default="countdown,chain_sum,math", help="which of countdown,chain_sum,math")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.seconds, args.concurrency, args.only)), indent=2))
