"""Compare two runs on the tasks both ran: the difference in mean reward with a paired 95 % interval.

Each task's score is the mean reward over its samples (a missing reward counts 0, as in the
``all episodes`` mean). Pairing by task removes the spread between easy and hard tasks, so the
interval is much narrower than comparing two independent means; the difference is *real* at the
95 % level when the interval excludes 0.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._records import RunHeader
from envbuilder.eval._results import check_group_by, group_of, record_fields
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
    notes: list[str] = field(default_factory=list)
    """What differs between the runs besides the model (worth knowing before trusting the result)."""


def _scores(records: list[dict[str, Any]]) -> dict[TaskKey, list[float]]:
    out: dict[TaskKey, list[float]] = collections.defaultdict(list)
    for r in records:
        out[(str(r["split"]), int(r["index"]))].append(float(r.get("reward") or 0.0))
    return out


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
    a, b = _scores(records_a), _scores(records_b)
    keys = sorted(a.keys() & b.keys())
    if not keys:
        raise EnvbuilderError(f"{a_name} and {b_name} share no task", hint="Run both on the same split")
    return _compare(head_a, head_b, records_a, a, b, keys, group_by)


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
            labels.setdefault((str(r["split"]), int(r["index"])), group_of(r, group_by))
        members: dict[str, list[TaskKey]] = collections.defaultdict(list)
        for k in keys:
            members[labels[k]].append(k)
        groups = {name: _difference(ks, a, b) for name, ks in sorted(members.items())}
    return Comparison(
        head_a, head_b, _difference(keys, a, b), groups,
        only_a=len(a.keys() - b.keys()), only_b=len(b.keys() - a.keys()), notes=notes,
    )  # fmt: skip
