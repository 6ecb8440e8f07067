"""Where an in-process answer's CPU goes beyond the grader's: verl's `compute_score`, piece by piece.

Each piece runs alone over the same 2,000 GSM8K gold answers of the train split (best of 5,
CPU time per answer), so the difference between verl and the grader alone can be read as
the pieces it is made of (issue 37 item 4):

    python bench/adapter_pieces.py [--count 2000]

The grader's own figure includes reading the task (`view.task`), as the adapters must; the
"prefetched" rows read every task before the clock starts, which shows what a fresh task row
costs the grader beyond reading it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from rollouts import ENVS, golds

from envbuilder.episode import Episode
from envbuilder.integrations import verl
from envbuilder.integrations._local import LocalEpisode, environment
from envbuilder.threadloop import run_sync


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    n = parser.parse_args().count
    where = str(ENVS / "gsm8k.yaml")
    env = environment(where)
    assert env.submit is not None
    grader, toolbox = env.submit.grader, env.toolbox
    name, field = env.submit.spec.name, env.submit.spec.answer_field
    view = env.split("train")
    answers = [f"The answer is {g}." for g in golds()[:n]]
    tasks = [view.task(i) for i in range(n)]

    def cpu(fn: Callable[[], Any]) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        return 1e6 * best / n

    async def grade_fresh() -> None:
        for i in range(n):
            await grader.grade(answers[i], view.task(i), {})

    async def grade_prefetched() -> None:
        for i in range(n):
            await grader.grade(answers[i], tasks[i], {})

    async def answer_tool() -> None:
        for i in range(n):
            await toolbox.answer(Episode(task=tasks[i]), {field: answers[i]})

    async def nothing() -> None:
        return None

    def answer_tools() -> None:
        run_sync(answer_tool())

    def task_free_starts() -> None:
        for _ in range(n):
            run_sync(nothing(), task=False)

    def local_step() -> None:
        for i in range(n):
            LocalEpisode(env, tasks[i]).step(name, {field: answers[i]})

    def local_of_step() -> None:
        for i in range(n):
            LocalEpisode.of(env, "train", i).step(name, {field: answers[i]})

    def compute_score() -> None:
        for i in range(n):
            verl.compute_score("gsm8k", answers[i], "", {"spec": where, "split": "train", "index": i})

    rows = [
        ("grader.grade, the task read in the loop (the bench's reference)", lambda: run_sync(grade_fresh())),
        ("view.task alone", lambda: [view.task(i) for i in range(n)]),
        ("grader.grade, tasks prefetched", lambda: run_sync(grade_prefetched())),
        ("the answer tool (Toolbox.answer on a new Episode), tasks prefetched", answer_tools),
        ("run_sync of a coroutine that never waits (task-free)", task_free_starts),
        ("Episode(task) alone", lambda: [Episode(task=tasks[i]) for i in range(n)]),
        ("LocalEpisode(env, task).step, tasks prefetched", local_step),
        ("LocalEpisode.of(env, split, i).step (reads the task)", local_of_step),
        ("verl compute_score", compute_score),
    ]
    print("| piece | CPU µs per answer |\n|---|---|")
    for label, fn in rows:
        print(f"| {label} | {cpu(fn):.1f} |")


if __name__ == "__main__":
    main()
