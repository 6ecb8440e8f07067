"""``envbuilder check SPEC``: gold answers must earn full reward, and the spec's tests pass."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from envbuilder.cli import _console
from envbuilder.cli._endpoints import (
    JudgeBaseUrlOption,
    JudgeKeyEnvOption,
    JudgeModelOption,
    NoCacheOption,
    UserBaseUrlOption,
    UserKeyEnvOption,
    UserModelOption,
    apply_endpoint_flags,
    describe,
)
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption, TrustedKeyOption, spec_of

if TYPE_CHECKING:
    from envbuilder.authoring import BadRows, CheckResult
    from envbuilder.environment import Environment


def check(
    spec: Annotated[
        Path, typer.Argument(help="The spec file (YAML) or a pack (.zip).", exists=True, dir_okay=False)
    ],
    sample: Annotated[int, typer.Option(help="Tasks per split whose gold answer is submitted.", min=0)] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the random sample of tasks.")] = 0,
    hacks: Annotated[
        bool,
        typer.Option("--hacks", help="Also send hostile answers (reward hacks); any reward above 0 fails."),
    ] = False,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="With --hacks: write the result beside the spec (<stem>.hacks.json) for catalogs.",
        ),
    ] = False,
    trusted_key: TrustedKeyOption = None,
    trust_code: TrustCodeOption = False,
    judge_base_url: JudgeBaseUrlOption = None,
    judge_model: JudgeModelOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    user_base_url: UserBaseUrlOption = None,
    user_model: UserModelOption = None,
    user_api_key_env: UserKeyEnvOption = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Self-check SPEC: every task has a target, gold answers earn full reward, `tests:` pass.

    Before any model sees the spec: no task's target may be null or empty, its grader must give
    full reward to the gold answer (the spec's `gold:`, else one the grader knows) of a sample of
    tasks, and each entry of its `tests:` block the reward it lists. Exit 1 on any failure.
    A spec's own code (`function` and `mcp` tools) runs only from your own folders; a pack's
    only with --trust-code, or a signature that --trusted-key verifies.
    """
    flagged = apply_endpoint_flags(
        user_base_url, user_model, user_api_key_env, judge_base_url, judge_model, judge_api_key_env, no_cache
    )
    with fail_on_errors():
        loaded, signed = spec_of(spec, trusted_key=trusted_key)
    if record and loaded != spec:
        _console.line("--record writes beside the spec: check the spec, not its pack", "red")
        raise typer.Exit(2)
    env, bad_rows, results = _run(loaded, sample, seed, trust_code=True if trust_code or signed else None)
    for text in describe([env], flagged):
        _console.line(f"{spec}: {text}")
    _report_rows(env, bad_rows)
    _report_gold(spec, env, results, sample)
    _report_empty(spec, results)
    _report_tests(spec, results)
    failed = [r for r in results if not r.passed and not r.skipped]
    if record and not hacks:
        _console.line("--record keeps the result of --hacks: give both", "red")
        raise typer.Exit(2)
    hacked = _audit_hacks(spec, env, seed, record=record) if hacks else False
    if not failed:
        if bad_rows or hacked:
            raise typer.Exit(1)
        return
    _report_failures(failed)
    raise typer.Exit(1)


def _run(
    spec: Path, sample: int, seed: int, *, trust_code: bool | None
) -> tuple[Environment, list[BadRows], list[CheckResult]]:
    """Validate and compile the spec (exit 1 when invalid), scan every task's target and
    prompt, and run the gold and `tests:` cases."""
    from envbuilder.authoring import gold_cases, run_cases, scan_tasks, spec_cases, validate_spec

    with fail_on_errors():
        validation = validate_spec(spec, trust_code=trust_code)
        if not validation.ok:
            _console.problems(validation.problems)
            _console.line(f"{spec}: invalid, nothing checked (see `envbuilder validate`)", "bold red")
            raise typer.Exit(1)
        env = validation.env
        assert env is not None
        bad_rows = scan_tasks(env)
        cases = gold_cases(env, sample, seed) + spec_cases(env)
        with _console.progress(len(cases), f"checking {env.name}") as advance:
            results = run_cases(env, cases, progress=advance)
    return env, bad_rows, results


def _report_rows(env: Environment, found: list[BadRows]) -> None:
    """Each problem of single tasks, located at the spec key at fault, with its first rows."""
    from envbuilder.authoring._selfcheck import BAD_PROMPT

    problems = []
    for bad in found:
        shown = ", ".join(f"{bad.split}[{i}]" for i, _ in bad.rows)
        more = f" and {bad.count - len(bad.rows):,} more" if bad.count > len(bad.rows) else ""
        message = f"{bad.count:,} of {bad.scanned:,} {bad.split} tasks {bad.problem} ({bad.rows[0][1]})"
        message += f": {shown}{more}"
        hint = (
            "They could not be served; fix or filter those rows"
            if bad.problem == BAD_PROMPT
            else "Their answers would be ungradeable; fix or filter those rows"
        )
        problems.append(env.loaded.locate(bad.loc, message, code="task_rows", hint=hint))
    _console.problems(problems)


def _report_gold(spec: Path, env: Environment, results: list[CheckResult], sample: int) -> None:
    from envbuilder.authoring import gold_is_circular

    gold = [r for r in results if r.case.kind == "gold"]
    if not gold:
        return
    graded = [r for r in gold if not r.skipped]
    if not graded:  # nothing to grade: say why, not "0/0"
        _console.line(
            f"{spec}: gold answers: none checked ({_sampled(env, gold, sample)}): {_why_none(env, gold)}"
        )
        return
    passed = sum(r.passed for r in graded)
    line = f"{spec}: gold answers: {passed}/{len(graded)} get full reward ({_sampled(env, gold, sample)})"
    skipped = [r for r in gold if r.skipped]
    if skipped:
        line += f" ({len(skipped)} skipped: {skipped[0].case.skip or 'the grader states no target'})"
    _console.line(line, "green" if passed == len(graded) else "red")
    actions = sum(r.actions for r in graded)
    if actions:
        ok = sum(r.actions_ok for r in graded)
        _console.line(
            f"{spec}: gold actions: {ok}/{actions} succeeded (the tool calls made before each gold answer)",
            "green" if ok == actions else "yellow",  # a refusal by the rules can be gold (τ²)
        )
    if gold_is_circular(env):
        _console.line(
            f"{spec}: note: the gold check is circular: with no `gold:` in the spec, each task's "
            "own grading target was submitted, which shows only that the target survives the "
            'grader\'s extraction. Add `gold:` (e.g. `gold: "{{ solution }}"`) for a check that '
            "means something",
            "yellow",
        )


def _why_none(env: Environment, gold: list[CheckResult]) -> str:
    """Why no sampled task has a gold answer to submit."""
    noted = next((r.case.skip for r in gold if r.case.skip), None)
    if noted is not None:
        return noted
    submit = env.submit
    assert submit is not None
    if submit.dialogue is not None or submit.user is not None:
        kind = "a dialogue, graded turn by turn" if submit.dialogue is not None else "a conversation"
        grader = env.spec.grader.type if env.spec.grader is not None else "transcript"
        return (
            f"each task is {kind} by its {grader} grader on replies the spec "
            "does not give, so there is no gold answer to submit; add `gold:` (a correct reply) and "
            "`tests:` (replies with the reward each must get) for check to grade"
        )
    return "the grader states no target for any sampled task (its target field is empty or null)"


def _report_empty(spec: Path, results: list[CheckResult]) -> None:
    empty = [r for r in results if r.case.kind == "empty"]
    if empty:
        passed = sum(r.passed for r in empty)
        _console.line(
            f"{spec}: empty solutions: {passed}/{len(empty)} get no reward (no work, an empty answer)",
            "green" if passed == len(empty) else "red",
        )


def _report_tests(spec: Path, results: list[CheckResult]) -> None:
    tests = [r for r in results if r.case.kind == "test"]
    if tests:
        passed = sum(r.passed for r in tests)
        _console.line(
            f"{spec}: tests: {passed}/{len(tests)} pass", "green" if passed == len(tests) else "red"
        )


def _report_failures(failed: list[CheckResult]) -> None:
    _console.line()
    _console.table(
        ["case", "task", "response", "expected", "got", "reason"],
        [
            [
                r.case.label if r.case.kind == "test" else r.case.kind,
                f"{r.case.split}[{r.case.index}]",
                _console.shorten(repr(r.case.response), 40),
                _reward(r.case.expected),
                _reward(r.reward),
                _console.shorten(r.reason, 60),
            ]
            for r in failed
        ],
        title=f"{len(failed)} failure{'s' if len(failed) != 1 else ''}",
    )


def _sampled(env: Any, gold: list[Any], sample: int) -> str:
    """``--sample 50 per split: train 50 of 7,473, test 50 of 1,319``: what the total counts."""
    per_split = Counter(r.case.split for r in gold)
    counts = ", ".join(f"{split} {n:,} of {len(env.splits[split]):,}" for split, n in per_split.items())
    return f"--sample {sample:,} per split: {counts}"


def _audit_hacks(spec: Path, env: Environment, seed: int, *, record: bool = False) -> bool:
    """Run the reward-hacking battery and print its result (and with ``record``, write it
    beside the spec); True when an answer earned reward."""
    from envbuilder.authoring import hack_cases, run_hacks
    from envbuilder.authoring._hacks import HACK_SAMPLE
    from envbuilder.catalog._audit import write_record

    with (
        fail_on_errors(),
        _console.progress(len(hack_cases(env, seed=seed)), f"hacking {env.name}") as advance,
    ):
        report = run_hacks(env, seed=seed, progress=advance)
    grader = env.spec.grader.type if env.spec.grader is not None else "dialogue"
    rewarded = report.rewarded
    _console.line(
        f"{spec}: hacks: the highest reward of {len(report.results)} hostile answers ({grader} grader) "
        f"is {report.worst:g}",
        "green" if not rewarded else "red",
    )
    if rewarded:
        _console.table(
            ["answer", "task", "reward", "reason"],
            [
                [
                    r.case.label,
                    f"{r.case.split}[{r.case.index}]",
                    _reward(r.reward),
                    _console.shorten(r.reason, 60),
                ]
                for r in rewarded
            ],
            title=f"{len(rewarded)} hostile answer{'s' if len(rewarded) != 1 else ''} earned reward",
        )
    expected = report.expected
    if expected:
        tasks = sorted({f"{r.case.split}[{r.case.index}]" for r in expected})
        _console.line(
            f"{spec}: hacks: {len(expected)} hostile answer{'s' if len(expected) != 1 else ''} earned "
            f"reward on {', '.join(tasks)}, where the spec's `inaction:` marks doing nothing as the "
            "right answer: expected, not hacks",
            "yellow",
        )
    if record:
        written = write_record(env, report, seed=seed, sample=HACK_SAMPLE)
        _console.line(f"{spec}: hacks: recorded in {written} (catalog entries publish it)")
    return bool(rewarded)


def _reward(value: float | None) -> str:
    return "none (ungradeable)" if value is None else f"{value:g}"
