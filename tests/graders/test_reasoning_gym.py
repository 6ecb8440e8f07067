"""The `reasoning_gym` source and grader on the real reasoning-gym package."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.errors import SpecError
from envbuilder.graders import GraderContext, graders
from envbuilder.graders._base import Outcome
from envbuilder.graders._reasoning_gym import extract_answer
from tests.conftest import ENVS
from tests.data.helpers import make_env
from tests.loop import ticking

pytest.importorskip("reasoning_gym")

RG = {
    "type": "reasoning_gym",
    "num_tasks": 10**9,
    "tasks": {"chain_sum": {"weight": 3}, "spell_backward": {}},
    "levels": {
        "easy": {"chain_sum": {"max_terms": 2}},
        "hard": {"chain_sum": {"min_terms": 5, "max_terms": 6}},
    },
}


def _grader(**config):
    # The longest time limit unless a test sets one: a checker's first run on a loaded machine
    # (a fresh grading process importing SymPy) may take more than the default 10 s.
    config = {"type": "reasoning_gym", "timeout": 120, **config}
    model = graders.get("reasoning_gym").Config.model_validate(config)
    return graders.get("reasoning_gym")(model, GraderContext())


def _grade(grader, answer: str, task: dict):
    return asyncio.run(grader.grade(answer, task, {}))


def test_rows_are_deterministic_weighted_and_carry_their_family_and_level(tmp_path: Path) -> None:
    env = make_env(RG, {"easy": {}, "hard": {}}, tmp_path)
    again = make_env(RG, {"easy": {}, "hard": {}}, tmp_path)
    tasks = env.split("easy").task_range(0, 400)
    assert tasks == again.split("easy").task_range(0, 400)
    counts = {f: sum(t["family"] == f for t in tasks) for f in ("chain_sum", "spell_backward")}
    assert 240 <= counts["chain_sum"] <= 360 and counts["chain_sum"] + counts["spell_backward"] == 400
    assert {t["difficulty"] for t in tasks} == {"easy"}
    sums = [t for t in env.split("hard").task_range(0, 50) if t["family"] == "chain_sum"]
    assert all(5 <= t["question"].count(" + ") + t["question"].count(" - ") + 1 <= 6 for t in sums)
    assert env.split("easy").task(10**9 - 1)["id"] == f"easy-{10**9 - 1}"


def test_the_family_checker_scores_with_partial_credit(tmp_path: Path) -> None:
    env = make_env(RG, {"easy": {}}, tmp_path)
    grader = _grader()
    task = next(t for t in env.split("easy").task_range(0, 50) if t["family"] == "spell_backward")
    assert _grade(grader, task["answer"], task).score == 1.0
    assert _grade(grader, f"<answer>{task['answer']}</answer>", task).outcome is Outcome.CORRECT
    answer = task["answer"]
    partial = _grade(grader, answer[:-1] + ("a" if answer[-1] != "a" else "b"), task)
    assert partial.outcome is Outcome.CORRECT
    assert partial.score == pytest.approx((len(answer) - 1) / len(answer))
    # reasoning-gym's prefix credit can sum a hair above 1 for a longer answer: never full credit.
    assert _grade(grader, answer + " yes", task).score != 1.0
    assert _grade(grader, "zzzz", task).outcome is Outcome.INCORRECT
    only_tags = _grader(extract="answer_tag")
    assert _grade(only_tags, task["answer"], task).outcome is Outcome.UNGRADEABLE
    # A forged task without generation coordinates is never graded against anything.
    assert _grade(grader, "3", {"question": "1+2", "answer": "3"}).outcome is Outcome.UNGRADEABLE


def test_partial_credit_false_pays_full_marks_only_and_sprays_earn_nothing(tmp_path: Path) -> None:
    env = make_env(RG, {"easy": {}}, tmp_path)
    strict = _grader(partial_credit=False)
    task = next(t for t in env.split("easy").task_range(0, 50) if t["family"] == "spell_backward")
    answer = task["answer"]
    assert _grade(strict, answer, task).score == 1.0
    near = _grade(strict, answer[:-1] + ("a" if answer[-1] != "a" else "b"), task)
    assert (near.outcome, near.score) == (Outcome.INCORRECT, 0.0)
    assert near.details["family_score"] == pytest.approx((len(answer) - 1) / len(answer))
    # Several different boxed answers are a hedge whatever partial_credit says.
    spray = " ".join(f"\\boxed{{{v}}}" for v in ("zzz", answer, "0", "1"))
    for grader in (strict, _grader()):
        hedge = _grade(grader, spray, task)
        assert (hedge.outcome, hedge.score) == (Outcome.INCORRECT, 0.0), hedge.reason


def test_otherwise_grades_rows_that_reasoning_gym_did_not_make() -> None:
    grader = _grader(otherwise={"type": "exact_match", "target": "{{ answer }}", "extract": "number"})
    assert grader.fields >= {"rg", "answer"}
    assert _grade(grader, "It is 3.", {"answer": "3"}).score == 1.0
    assert _grade(grader, "It is 4.", {"answer": "3"}).score == 0.0


@pytest.mark.parametrize(
    ("response", "mode", "expected"),
    [
        ("<answer> 42 </answer>", "auto", "42"),
        ("<answer>1</answer> then <answer>2</answer>", "auto", "2"),
        ("  42 ", "auto", "42"),
        ("42", "answer_tag", None),
        ("<answer>42</answer>", "none", "<answer>42</answer>"),
    ],
)
def test_extraction(response: str, mode: str, expected: str | None) -> None:
    assert extract_answer(response, mode) == expected


def test_unknown_families_and_bad_configs_are_located(tmp_path: Path) -> None:
    bad = {**RG, "tasks": {"chain_sums": {}}, "levels": {}}
    with pytest.raises(SpecError) as info:
        make_env(bad, {"test": {}}, tmp_path)
    (problem,) = info.value.problems
    assert (problem.code, problem.hint) == ("unknown_family", "Did you mean 'chain_sum'?")
    bad = {**RG, "levels": {"easy": {"chain_sum": {"max_terms": 0}}}}
    with pytest.raises(SpecError) as info:
        make_env(bad, {"easy": {}}, tmp_path)
    (problem,) = info.value.problems
    assert problem.code == "family_config" and problem.loc == ("dataset", "levels", "easy")
    bad = {**RG, "levels": {"easy": {"chain_summ": {}}}}
    with pytest.raises(SpecError) as info:
        make_env(bad, {"easy": {}}, tmp_path)
    assert "Did you mean 'chain_sum'?" in info.value.problems[0].message


def test_check_submits_each_familys_reference_answer() -> None:
    result = CliRunner().invoke(app, ["check", str(ENVS / "reasoning_mix.yaml"), "--sample", "20"])
    assert result.exit_code == 0, result.output
    assert "gold answers: 120/120 get full reward" in result.output


def test_a_checker_past_its_time_limit_is_killed_and_the_answer_ungradeable(tmp_path: Path) -> None:
    # countdown's checker parses the answer with SymPy: 9**9**9**9 is one integer power that
    # holds its interpreter for hours. It runs in a grading process, killed at the limit, while
    # the server's own loop keeps running.
    countdown = {"type": "reasoning_gym", "num_tasks": 100, "tasks": {"countdown": {}}}
    task = make_env(countdown, {"test": {}}, tmp_path).split("test").task(0)

    async def main():  # type: ignore[no-untyped-def]
        grader = _grader(timeout=2)
        await grader.grade("<answer>1</answer>", task, {})  # the grading process is up and warm
        async with ticking() as ticks:
            return await grader.grade("<answer>9**9**9**9</answer>", task, {}), ticks[0]

    grade, ticks = asyncio.run(main())
    assert grade.outcome is Outcome.UNGRADEABLE and grade.reason == "the countdown checker took more than 2 s"
    assert ticks >= 10  # the loop kept turning (held by the checker, it would have counted one)
    task = make_env(RG, {"easy": {}}, tmp_path).split("easy").task(0)
    assert _grade(_grader(), task["answer"], task).score == 1.0  # a fresh process scores the next
    too_long = _grade(_grader(), "x" * 20_001, task)
    assert too_long.outcome is Outcome.UNGRADEABLE and "too long" in too_long.reason


def test_a_checker_that_evaluates_the_answer_cannot_reach_the_host(tmp_path: Path) -> None:
    # countdown's checker is SymPy's parse_expr, which is eval: the answer is Python that runs.
    # It runs in a confined process: no write, no connection, no signal reaches the host.
    import os
    import signal
    import socket

    countdown = {"type": "reasoning_gym", "num_tasks": 100, "tasks": {"countdown": {}}}
    task = make_env(countdown, {"test": {}}, tmp_path).split("test").task(0)
    canary = tmp_path / "canary"
    signalled: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: signalled.append(1))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        answers = [
            f"open('{canary}', 'w').write('x')",
            f"__import__('socket').create_connection(('127.0.0.1', {port}), 2)",
            f"__import__('os').kill({os.getpid()}, {int(signal.SIGUSR1)})",
            "__import__('os').getpid()",
        ]
        try:
            grades = [_grade(_grader(), f"<answer>{a}</answer>", task) for a in answers]
            with pytest.raises(TimeoutError):
                listener.accept()
        finally:
            signal.signal(signal.SIGUSR1, previous)
    assert not canary.exists() and not signalled
    assert all(g.score is None or g.score < 1 for g in grades), grades
