"""Grading throughput of each built-in grader, in answers per second.

    python bench/graders.py [--seconds 1.0]

Answers are GSM8K-style and MATH-500-style strings graded one after another in one event
loop (the LLM judge: 64 at a time against a local fake endpoint that answers at once, first
uncached, then from the on-disk cache). Figures depend on the machine; compare runs on one box.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import TypeAdapter

from envbuilder.graders import Grader, GraderContext, build_grader
from envbuilder.spec._models import GraderField
from tests.fakes.chat_server import ChatServer, completion

GSM_TASK = {"question": "18 ducks: how many legs?", "answer": "18 * 2 = 36\n#### 36"}
GSM_ANSWERS = ["The answer is 36.", "**36**", "$36.00", "36 legs", "I think 35", "no idea"]
MMLU_TASK = {"choices": ["3", "4", "5", "22"], "answer": 1}
MMLU_ANSWERS = ["B", "(B)", "The answer is B", "B) 4", "C", "unsure"]
MATH_TASK = {"answer": "\\frac{14}{3}"}
MATH_ANSWERS = ["\\boxed{\\frac{14}{3}}", "$4\\frac{2}{3}$", "\\boxed{\\dfrac{13}{3}}", "0.5"]

EXACT = {"type": "exact_match", "target": "{{ answer.split('####')[-1] }}", "extract": "number"}
REGEX = {"type": "regex", "pattern": r"\b{{ answer.split('####')[-1].strip() }}\b"}
CHOICE = {"type": "choice", "target": "{{ answer }}", "choices_field": "choices"}
MATH = {"type": "math", "target": "{{ answer }}"}


def make(block: dict[str, Any]) -> Grader:
    return build_grader(TypeAdapter(GraderField).validate_python(block), GraderContext())


async def sequential(grader: Grader, answers: list[str], task: dict[str, Any], seconds: float) -> float:
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        await grader.grade(answers[n % len(answers)], task, {})
        n += 1
    return n / (time.perf_counter() - started)


async def concurrent(grader: Grader, count: int, task: dict[str, Any], tag: str) -> float:
    started = time.perf_counter()
    for batch in range(0, count, 64):
        await asyncio.gather(*(grader.grade(f"{tag} {i}", task, {}) for i in range(batch, batch + 64)))
    return count / (time.perf_counter() - started)


async def main(seconds: float) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []
    rows.append(
        ("exact_match (extract: number)", await sequential(make(EXACT), GSM_ANSWERS, GSM_TASK, seconds))
    )
    rows.append(
        ("regex (pattern from the task)", await sequential(make(REGEX), GSM_ANSWERS, GSM_TASK, seconds))
    )
    rows.append(("choice", await sequential(make(CHOICE), MMLU_ANSWERS, MMLU_TASK, seconds)))
    try:
        math = make(MATH)
    except Exception as exc:  # the optional extra is missing
        print(f"math: skipped ({exc})")
    else:
        rows.append(("math (math-verify)", await sequential(math, MATH_ANSWERS, MATH_TASK, seconds)))
    cascade = make({"type": "cascade", "graders": [EXACT, REGEX]})
    rows.append(("cascade (exact_match → regex)", await sequential(cascade, GSM_ANSWERS, GSM_TASK, seconds)))

    with ChatServer(lambda body, i: (200, completion("VERDICT: CORRECT"), {})) as server:
        judge = make(
            {"type": "llm_judge", "base_url": server.base_url, "model": "m", "reference": "{{ answer }}"}
        )
        rows.append(
            ("llm_judge, uncached (local fake, 64 in flight)", await concurrent(judge, 512, GSM_TASK, "a"))
        )
        rows.append(("llm_judge, cache hits (64 in flight)", await concurrent(judge, 512, GSM_TASK, "a")))
        await judge.aclose()
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per grader")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["ENVBUILDER_CACHE_DIR"] = cache
        results = asyncio.run(main(args.seconds))
    print(f"{'grader':<50} {'answers/s':>10}")
    for name, rate in results:
        print(f"{name:<50} {rate:>10,.0f}")
