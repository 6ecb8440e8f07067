"""A spec's self-check: every task has a target and a prompt that render, gold answers earn
full reward, and its ``tests:`` get their rewards.

Answers go through the real answer path (``Environment.call_tool`` on a fresh :class:`Episode`),
so extraction, normalisation, grading and the reward scale are all exercised. The gold answer
is the spec's ``gold:`` template when it has one; otherwise the answer the grader knows earns
full reward (``Grader.gold``: for most graders their own target, and the check says that this
is circular, since a target compared with itself proves little; a ``regex`` grader knows none).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envbuilder.data import Task
from envbuilder.environment import Environment, Episode
from envbuilder.errors import EnvbuilderError, Loc
from envbuilder.graders._trajectory import BROKE, gold_calls
from envbuilder.protocol import RunToolSuccess
from envbuilder.templating import Template

__all__ = [
    "BadRows",
    "Case",
    "CheckResult",
    "gold_cases",
    "run_cases",
    "scan_tasks",
    "spec_cases",
]

#: Rows per split scanned by :func:`scan_tasks` (a bound on the work for huge datasets).
SCAN_LIMIT = 200_000
#: Rows of a generated split scanned by :func:`scan_tasks`.
GENERATED_SCAN_LIMIT = 2_000


@dataclass
class Case:
    """One response to one task, and the reward it must get."""

    kind: str
    """``gold`` (the spec's ``gold:`` answer, else the grader's own target), ``empty`` (no work
    and an empty answer, for graders of the work in a container) or ``test`` (an entry of the
    spec's ``tests:``)."""
    label: str
    """``test[3]`` or ``tests[0]``: how the case is named in reports."""
    split: str
    index: int
    response: str | None
    """None when the grader states no target for the task (the case is skipped)."""
    expected: float | None
    """The reward it must get; None when it must be ungradeable."""
    reason: str | None = None
    """Text the grade's reason must contain (None: not checked)."""
    skip: str | None = None
    """Why ``response`` is None though the task has a target (e.g. a pattern, not an answer)."""
    error: str | None = None
    """Why the response could not be made for this task (a ``gold:`` that fails to render on
    it): the case fails with this reason."""
    calls: list[dict[str, Any]] | None = None
    """Tool calls (``{name, arguments}``) made before the response is submitted: the task's
    gold actions (the spec's ``gold_actions``), or a variation of them."""


@dataclass
class CheckResult:
    case: Case
    reward: float | None = None
    reason: str = ""
    passed: bool = False
    skipped: bool = False
    actions: int = 0
    """Gold actions (the case's ``calls``) run before the response."""
    actions_ok: int = 0
    """Of them, those that succeeded (no error from the tool)."""


def gold_cases(env: Environment, sample: int, seed: int = 0) -> list[Case]:
    """Up to ``sample`` random tasks of each split, each answered with its gold answer: the
    spec's ``gold:`` template, else the answer the grader knows earns full reward
    (``Grader.gold``, its target for most graders: see :func:`gold_is_circular`). A task with
    neither is skipped, with a note saying why."""
    assert env.submit is not None
    rng = random.Random(seed)
    full = env.submit.spec.reward_correct
    gold = env.spec.gold
    template = Template(gold, name="gold", base_dir=env.loaded.base_dir) if gold is not None else None
    cases = []
    for name, view in env.splits.items():
        n = len(view)
        for index in sorted(rng.sample(range(n), min(sample, n))):
            task = view.task(index)
            try:
                if _missing(env, task) is not None:
                    continue  # reported by scan_tasks()
            except EnvbuilderError:
                continue  # a target that fails to render: reported by scan_tasks()
            case = Case("gold", f"{name}[{index}]", name, index, None, full)
            try:
                if template is not None:
                    case.response = template.render(task)
                else:
                    case.response = env.submit.gold(task)
                    if case.response is None and env.submit.target(task) is not None:
                        case.skip = _no_gold(env)
            except EnvbuilderError as exc:
                case.error = str(exc)  # this task fails; the others are still checked
            if env.spec.gold_actions:
                case.calls = gold_calls(task.get(env.spec.gold_actions))
            cases.append(case)
            if getattr(env.submit.grader, "empty_earns_nothing", False):
                # Graders of the work in a container (Harbor's tests): doing nothing must not pass.
                none = env.submit.spec.reward_incorrect
                cases.append(Case("empty", f"{name}[{index}]", name, index, "", none))
    return cases


def _no_gold(env: Environment) -> str:
    grader = env.spec.grader.type if env.spec.grader is not None else "dialogue"
    return (
        f"the {grader} grader's target is no answer to submit (a pattern matches many): "
        'add `gold:` (e.g. `gold: "{{ answer }}"`) for check to submit one'
    )


def gold_is_circular(env: Environment) -> bool:
    """True when the gold check submits the grader's own target (the spec has no ``gold:``) to
    a grader that compares answers with that target (not, e.g., ``unit_tests``, which runs the
    reference solution against the task's tests)."""
    grader = env.submit.grader if env.submit is not None else None
    return env.spec.gold is None and (grader is None or grader.compares_target)


#: Rows read and rendered at a time by :func:`scan_tasks`.
SCAN_BATCH = 1_000

NO_TARGET = "have no target"
BAD_TARGET = "have a target that fails to render"
BAD_PROMPT = "have a prompt that fails to render"


@dataclass
class BadRows:
    """Tasks of one split with one problem that only their rows show: no target (null or
    empty, so their answers are ungradeable), or a target or prompt that fails to render."""

    split: str
    problem: str
    """:data:`NO_TARGET`, :data:`BAD_TARGET` or :data:`BAD_PROMPT`."""
    loc: Loc
    """The spec key at fault (``grader``, ``prompt``, ``prompt.system`` …)."""
    count: int
    """How many of the scanned rows have it."""
    scanned: int
    rows: list[tuple[int, str]]
    """The first of them: (index, reason)."""


def scan_tasks(env: Environment, limit: int = SCAN_LIMIT, show: int = 10) -> list[BadRows]:
    """The problems of single tasks, by split (up to ``limit`` rows of each scanned, fewer of a
    generated split): a target that is null, renders empty or fails to render, and a prompt that
    fails to render. Validation renders only a sample; these rows would fail when served."""
    out = []
    for name, view in env.splits.items():
        # Generated rows (no file behind the table) cost real work each: scan fewer of them.
        scanned = min(len(view), min(limit, GENERATED_SCAN_LIMIT) if view.table.generated else limit)
        found: dict[tuple[str, Loc], BadRows] = {}
        for start in range(0, scanned, SCAN_BATCH):
            tasks = view.task_range(start, min(start + SCAN_BATCH, scanned))
            for (problem, loc), index, reason in _scan_batch(env, tasks):
                bad = found.setdefault((problem, loc), BadRows(name, problem, loc, 0, scanned, []))
                bad.count += 1
                if len(bad.rows) < show:
                    bad.rows.append((start + index, reason))
        order = [NO_TARGET, BAD_TARGET, BAD_PROMPT]
        out.extend(sorted(found.values(), key=lambda b: order.index(b.problem)))
    return out


def _scan_batch(env: Environment, tasks: list[Task]) -> list[tuple[tuple[str, Loc], int, str]]:
    """``((problem, key), position, reason)`` of each problem of ``tasks``, in row order."""
    assert env.prompter is not None
    found: list[tuple[tuple[str, Loc], int, str]] = []
    for i, task in enumerate(tasks):
        try:
            reason = _missing(env, task)
        except EnvbuilderError as exc:
            found.append(((BAD_TARGET, ("grader",)), i, str(exc)))
        else:
            if reason is not None:
                found.append(((NO_TARGET, ("grader",)), i, reason))
    for i, (loc, error) in env.prompter.failures(tasks).items():
        found.append(((BAD_PROMPT, loc), i, str(error)))
    return sorted(found, key=lambda f: f[1])


def _missing(env: Environment, task: Task) -> str | None:
    # A dialogue's targets depend on the replies so far: they are checked per turn, not here.
    assert env.submit is not None
    return None if env.submit.dialogue is not None else env.submit.grader.missing_target(task)


def spec_cases(env: Environment) -> list[Case]:
    """The spec's ``tests:`` (the first split by default)."""
    first = next(iter(env.splits))
    return [
        Case("test", f"tests[{i}]", t.split or first, t.index, t.response, t.reward, t.reason)
        for i, t in enumerate(env.spec.tests)
    ]


def run_cases(
    env: Environment, cases: list[Case], progress: Callable[[], None] | None = None
) -> list[CheckResult]:
    """Submit each case's response on a fresh episode; ``progress`` is called after each."""

    async def run() -> list[CheckResult]:
        out = []
        for case in cases:
            out.append(await _run(env, case))
            if progress is not None:
                progress()
        return out

    return asyncio.run(run())


async def _run(env: Environment, case: Case) -> CheckResult:
    assert env.submit is not None
    if case.error is not None:
        return CheckResult(case, reason=case.error)
    if case.response is None:
        return CheckResult(
            case, reason=case.skip or "the grader states no target for this task", skipped=True
        )
    episode = Episode(task=env.split(case.split).task(case.index))
    try:
        return await _run_episode(env, case, episode)
    finally:
        if env.cleanup:
            await env.end_session(episode)  # a session container, a working folder


async def _run_episode(env: Environment, case: Case, episode: Episode) -> CheckResult:
    assert env.submit is not None and case.response is not None
    spec = env.submit.spec
    calls = case.calls or []
    failed: list[str] = []
    broken: list[str] = []
    for i, call in enumerate(calls, 1):
        made = (  # a gold call of the user's own tools (dual control) is made as the user
            await env.toolbox.call_as_user(episode, call["name"], call["arguments"])
            if call["name"] in env.toolbox.user_declared
            else await env.call_tool(episode, call["name"], call["arguments"])
        )
        # A tool that fails answers with an error output (metadata `error`), not only a refusal.
        error = (
            made.error if not isinstance(made, RunToolSuccess) else (made.output.metadata or {}).get("error")
        )
        if error:
            failed.append(f"gold call {i} of {len(calls)} ({call['name']}) failed: {error}")
            if not isinstance(made, RunToolSuccess) or BROKE in str(error):
                broken.append(failed[-1])
    ok = len(calls) - len(failed)
    failed = broken  # a refusal by the tool's rules can be part of the gold (τ²); a broken tool is not
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return CheckResult(case, reason=failed[0] + more, actions=len(calls), actions_ok=ok)
    if env.submit.user is not None:  # the user model is not asked: the episode is graded as it is
        output = await env.submit.conclude(episode, case.response)
    else:
        result = await env.call_tool(episode, spec.name, {spec.answer_field: case.response})
        if not isinstance(result, RunToolSuccess):
            return CheckResult(
                case, reason=f"the tool call failed: {result.error}", actions=len(calls), actions_ok=ok
            )
        output = result.output
    reason = str((output.metadata or {}).get("reason") or "")
    # The response's own reward: an attempt that leaves attempts open carries it in metadata
    # (only the call that ends an episode carries a reward; README, "Rewards").
    reward = output.reward if output.finished else (output.metadata or {}).get("attempt_reward")
    passed = (
        reward is None
        if case.expected is None
        else reward is not None and math.isclose(reward, case.expected, abs_tol=1e-9)
    )
    if case.reason is not None and case.reason not in reason:
        passed = False
        reason = f"{reason} (expected a reason containing {case.reason!r})"
    return CheckResult(case, reward, reason, passed, actions=len(calls), actions_ok=ok)
