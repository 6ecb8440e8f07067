"""Compare two runs on the tasks both graded: the difference in mean reward with a paired 95 % interval.

Each task's score is the mean reward over its graded samples (:func:`~envbuilder.eval._results.is_graded`,
as in the run's ``graded`` figures). An episode the grader did not decide (void: a judge that was
down; an error: an endpoint that was unreachable; ungradeable; out of turns) says nothing about
the model's answers, so it is left out, never scored 0, and a task is compared only when both
runs graded it; how many episodes each side left out, and why, is part of the result. Pairing by
task removes the spread between easy and hard tasks, so the interval is much narrower than
comparing two independent means; the difference is *real* at the 95 % level when the interval
excludes 0. When no task is graded in both runs there is nothing to compare: refused.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._records import RunHeader
from envbuilder.eval._results import OUTCOMES, check_group_by, group_of, is_graded, outcome_of, record_fields
from envbuilder.eval._run import ResultsFile, describe
from envbuilder.eval._stats import Estimate, paired_difference

__all__ = ["Comparison", "Difference", "compare_records", "compare_runs"]

TaskKey = tuple[str, int]
# What can differ between two runs besides the model, worth a note.
_NOTES = {
    "env_hash": "the environment's content hashes",
    "max_turns": "the turn limits (--max-turns)",
    "sampling": "the sampling options",
    "samples": "the samples per task (--samples)",
    "answer": "the answer modes (--answer)",
    "endpoints": "the judge's or simulated user's endpoints (--judge-model, --user-base-url, …)",
}


@dataclass(frozen=True)
class Difference:
    """B − A on the paired tasks of one group (or all)."""

    tasks: int
    a: float | None
    b: float | None
    diff: Estimate

    @property
    def significant(self) -> bool:
        low, high = self.diff.low, self.diff.high
        return low is not None and high is not None and (low > 0 or high < 0)

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "a": self.a, "b": self.b, "difference": self.diff.to_dict(),
                "significant": self.significant}  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    a: RunHeader
    """Run A's header (its identity under ``run``)."""
    b: RunHeader
    overall: Difference
    groups: dict[str, Difference] = field(default_factory=dict)
    only_a: int = 0
    """Tasks only A ran (left out)."""
    only_b: int = 0
    ungraded_a: dict[str, int] = field(default_factory=dict)
    """A's episodes left out as not graded, by outcome (``void``, ``error`` …)."""
    ungraded_b: dict[str, int] = field(default_factory=dict)
    unpaired: int = 0
    """Tasks both ran but not both graded (left out)."""
    notes: list[str] = field(default_factory=list)
    """What differs between the runs besides the model (worth knowing before trusting the result)."""

    def left_out(self) -> list[str]:
        """What was left out, in words: ``3 tasks only in A``, ``11 void, 2 error episodes in B``."""
        out = [f"{n} tasks only in {x}" for n, x in ((self.only_a, "A"), (self.only_b, "B")) if n]
        for side, counts in (("A", self.ungraded_a), ("B", self.ungraded_b)):
            if counts:
                out.append(f"{_counted(counts)} episodes in {side} (not graded)")
        if self.unpaired:
            out.append(f"{self.unpaired} tasks not graded in both runs")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.to_dict()["run"], "b": self.b.to_dict()["run"], "overall": self.overall.to_dict(),
            "groups": {k: g.to_dict() for k, g in self.groups.items()},
            "only_a": self.only_a, "only_b": self.only_b, "ungraded_a": self.ungraded_a,
            "ungraded_b": self.ungraded_b, "unpaired": self.unpaired, "notes": self.notes,
        }  # fmt: skip


def _counted(counts: dict[str, int]) -> str:
    """``{"void": 11, "no_answer": 2}`` in words: ``11 void, 2 no answer``."""
    return ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in counts.items())


def _task_key(record: dict[str, Any]) -> TaskKey:
    return (str(record["split"]), int(record["index"]))


def _scores(records: list[dict[str, Any]]) -> dict[TaskKey, list[float]]:
    """Each graded task's rewards of its graded episodes."""
    out: dict[TaskKey, list[float]] = collections.defaultdict(list)
    for r in records:
        if is_graded(r):
            out[_task_key(r)].append(float(r.get("reward") or 0.0))
    return out


def _ungraded(records: list[dict[str, Any]], tasks: set[TaskKey]) -> dict[str, int]:
    """The episodes of ``tasks`` left out as not graded, by outcome (in :data:`OUTCOMES` order)."""
    counts = collections.Counter(outcome_of(r) for r in records if _task_key(r) in tasks and not is_graded(r))
    return {o: counts[o] for o in OUTCOMES if counts[o]}


def _difference(
    keys: list[TaskKey], a: dict[TaskKey, list[float]], b: dict[TaskKey, list[float]]
) -> Difference:
    pairs = [(sum(a[k]) / len(a[k]), sum(b[k]) / len(b[k])) for k in keys]
    mean_a = sum(p[0] for p in pairs) / len(pairs) if pairs else None
    mean_b = sum(p[1] for p in pairs) / len(pairs) if pairs else None
    return Difference(len(pairs), mean_a, mean_b, paired_difference(pairs))


def compare_runs(a_path: Path, b_path: Path, *, group_by: str | None = None) -> Comparison:
    """Compare the runs in results files ``a_path`` and ``b_path`` (B − A).

    Raises:
        EnvbuilderError: a file is not a run, or the runs share no task.
    """
    head_a, records_a = ResultsFile(a_path).load()
    head_b, records_b = ResultsFile(b_path).load()
    return compare_records(
        (head_a, records_a, str(a_path)), (head_b, records_b, str(b_path)), group_by=group_by
    )


Run = tuple[RunHeader, list[dict[str, Any]], str]
"""A run's header, its episode records and what to call it in messages."""


def compare_records(run_a: Run, run_b: Run, *, group_by: str | None = None) -> Comparison:
    """Compare two loaded runs (B − A); see :func:`compare_runs`.

    Raises:
        EnvbuilderError: the runs are on different environments or share no task.
    """
    (head_a, records_a, a_name), (head_b, records_b, b_name) = run_a, run_b
    if head_a.run.env != head_b.run.env:
        raise EnvbuilderError(
            f"the runs are on different environments: {head_a.run.env!r} ({a_name}), "
            f"{head_b.run.env!r} ({b_name})",
            hint="Compare runs of one environment",
        )
    tasks_a, tasks_b = {_task_key(r) for r in records_a}, {_task_key(r) for r in records_b}
    ran = tasks_a & tasks_b
    if not ran:
        raise EnvbuilderError(f"{a_name} and {b_name} share no task", hint="Run both on the same split")
    a, b = _scores(records_a), _scores(records_b)
    keys = sorted(a.keys() & b.keys())
    ungraded_a, ungraded_b = _ungraded(records_a, ran), _ungraded(records_b, ran)
    if not keys:
        said = "; ".join(
            f"{name}: " + (_counted(counts) or "all graded")
            for name, counts in ((a_name, ungraded_a), (b_name, ungraded_b))
        )
        raise EnvbuilderError(
            f"{a_name} and {b_name}: no task of the {len(ran)} both ran was graded in both, so there is "
            f"nothing to compare (episodes not graded: {said})",
            hint="Void and errored episodes are no score; fix what failed (the endpoint, the judge) and "
            "rerun the same command to retry them",
            code="nothing_to_compare",
        )
    c = _compare(head_a, head_b, records_a, a, b, keys, group_by)
    return dataclasses.replace(
        c,
        only_a=len(tasks_a - ran),
        only_b=len(tasks_b - ran),
        ungraded_a=ungraded_a,
        ungraded_b=ungraded_b,
        unpaired=len(ran) - len(keys),
    )


def _compare(
    head_a: RunHeader,
    head_b: RunHeader,
    records_a: list[dict[str, Any]],
    a: dict[TaskKey, list[float]],
    b: dict[TaskKey, list[float]],
    keys: list[TaskKey],
    group_by: str | None,
) -> Comparison:
    run_a, run_b = head_a.run.model_dump(), head_b.run.model_dump()
    notes = [
        f"{_NOTES[name]} differ: {describe(name, run_a.get(name))} (A), {describe(name, run_b.get(name))} (B)"
        for name in _NOTES
        if run_a.get(name) != run_b.get(name)
    ]
    groups: dict[str, Difference] = {}
    if group_by is not None:
        check_group_by(group_by, record_fields(records_a), "run A's tasks")
        labels: dict[TaskKey, str] = {}
        for r in records_a:
            labels.setdefault(_task_key(r), group_of(r, group_by))
        members: dict[str, list[TaskKey]] = collections.defaultdict(list)
        for k in keys:
            members[labels[k]].append(k)
        groups = {name: _difference(ks, a, b) for name, ks in sorted(members.items())}
    return Comparison(head_a, head_b, _difference(keys, a, b), groups, notes=notes)
