"""A run's summary: episodes by how they ended, errors by reason, rewards with intervals, pass@k, groups.

How an episode ended (its ``outcome``), one of :data:`OUTCOMES`:

* ``correct`` / ``incorrect``: graded (the grader decided);
* ``ungradeable``: the episode finished but the grader could not decide (reward null);
* ``void``: the episode finished ungraded for a reason outside the answer (a judge that is
  down, a sandbox that cannot start: ``metadata.void``); counted and shown, left out of every
  mean and of pass@k, never scored 0;
* ``no_answer``: the turns ran out before the episode finished;
* ``error``: the model endpoint or the environment failed (the reason is in ``error``).

Two mean rewards, labelled: over **all** episodes but the void ones (an episode without a reward
counts 0, errors included) and over the **graded** ones only (:func:`is_graded`: correct or
incorrect), which is also what accuracy, pass@k and ``eval compare`` are computed over. A run
with no episode the agent could be scored on (:func:`unscored`) has no score at all.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envbuilder.errors import EnvbuilderError, did_you_mean
from envbuilder.eval._stats import FEW, Estimate, clustered_mean, pass_at_k

__all__ = [
    "GRADED",
    "OUTCOMES",
    "Summary",
    "check_group_by",
    "interval_methods",
    "is_graded",
    "outcome_of",
    "summarize",
    "unscored",
]

OUTCOMES = ("correct", "incorrect", "ungradeable", "void", "no_answer", "error")
GRADED = ("correct", "incorrect")
"""The outcomes the grader decided: the episodes of every "graded" figure."""


def outcome_of(record: dict[str, Any]) -> str:
    """How the episode of ``record`` ended (see the module docstring)."""
    if record.get("status") == "error":
        return "error"
    if not record.get("finished"):
        return "no_answer"
    if record.get("ungradeable"):
        metadata = record.get("metadata")
        return "void" if isinstance(metadata, dict) and metadata.get("void") else "ungradeable"
    return "correct" if record.get("correct") else "incorrect"


def is_graded(record: dict[str, Any]) -> bool:
    """Whether the grader decided the episode of ``record`` (its outcome is in :data:`GRADED`)."""
    return outcome_of(record) in GRADED


def unscored(outcomes: Mapping[str, int]) -> str | None:
    """Why a run (or group) with these outcome counts has no score, or None when it has one.

    No score when none of its episodes got a reward from the agent's behaviour (each was void,
    ended in an error or was ungradeable): a mean would score failures outside the answer as 0.
    Episodes that ran out of turns count (not answering is the agent's own failure).
    """
    counts = {o: n for o, n in outcomes.items() if n}
    if not counts or any(o in (*GRADED, "no_answer") for o in counts):
        return None
    said = ", ".join(f"{counts[o]} {o.replace('_', ' ')}" for o in OUTCOMES if o in counts)
    return f"void: no episode was graded ({said})"


def group_of(record: dict[str, Any], field_name: str) -> str:
    """The value of task field ``field_name`` of the episode, as text (``-`` when absent)."""
    value = (record.get("task") or {}).get(field_name)
    return "-" if value is None else str(value)


def check_group_by(field_name: str, fields: Iterable[str], where: str = "the tasks") -> None:
    """Refuse grouping by a field no task has (it would put every episode in one group ``-``).

    Raises:
        EnvbuilderError: ``field_name`` is not among ``fields``; with "Did you mean …?".
    """
    names = sorted(set(fields))
    if field_name in names:
        return
    close = did_you_mean(field_name, names)
    raise EnvbuilderError(
        f"--group-by {field_name!r}: {where} have no such field",
        hint=f"{close + ' ' if close else ''}Fields: {', '.join(names) or '(none)'}",
        code="unknown_field",
    )


def record_fields(records: Iterable[dict[str, Any]]) -> set[str]:
    """The task fields the records hold (what ``--group-by`` can name)."""
    return {k for r in records for k in (r.get("task") or {})}


@dataclass(frozen=True)
class Summary:
    """The scores of a set of episodes (a run, or one group of it)."""

    episodes: int
    tasks: int
    outcomes: dict[str, int]
    errors_by_reason: dict[str, int]
    reward_all: Estimate
    """Mean reward over all episodes but the void ones, a missing reward counting 0."""
    reward_graded: Estimate
    """Mean reward over graded episodes (correct or incorrect) only."""
    accuracy: Estimate
    """Share of correct episodes among graded ones."""
    pass_at: dict[int, float]
    """pass@k over graded episodes, for k ≤ the fewest graded samples any task with one has."""
    pass_at_ci: dict[int, Estimate]
    """pass@k with its 95 % interval (bootstrap over tasks; Wilson when k = samples = 1)."""
    turns: int
    prompt_tokens: int
    completion_tokens: int
    groups: dict[str, Summary] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return self.outcomes["error"]

    @property
    def graded(self) -> int:
        return sum(self.outcomes[o] for o in GRADED)

    @property
    def scored(self) -> bool:
        """Whether the run has a score at all (see :func:`unscored`)."""
        return unscored(self.outcomes) is None

    @property
    def reward_all_label(self) -> str:
        """What :attr:`reward_all` is over, in words: ``mean reward, all 18 episodes (2 void
        left out) (none = 0)``; the one label of that figure wherever it is shown."""
        void = self.outcomes["void"]
        counted = f"{self.episodes - void} episodes" + (f" ({void} void left out)" if void else "")
        return f"mean reward, all {counted} (none = 0)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "tasks": self.tasks,
            "outcomes": self.outcomes,
            "errors_by_reason": self.errors_by_reason,
            "mean_reward_all": self.reward_all.to_dict(),
            "mean_reward_graded": self.reward_graded.to_dict(),
            "accuracy_graded": self.accuracy.to_dict(),
            "pass_at_k": {str(k): v for k, v in self.pass_at.items()},
            "pass_at_k_ci95": {str(k): v.to_dict() for k, v in self.pass_at_ci.items()},
            "turns": self.turns,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            **({"groups": {k: g.to_dict() for k, g in self.groups.items()}} if self.groups else {}),
        }


def _ks(most: int) -> list[int]:
    ks, k = [], 1
    while k < most:
        ks.append(k)
        k *= 2
    return [*ks, most] if most else []


def _task(record: dict[str, Any]) -> tuple[str, int]:
    return (str(record.get("split")), int(record.get("index") or 0))


def summarize(records: Iterable[dict[str, Any]], *, group_by: str | None = None) -> Summary:
    """The summary of ``records`` (episode records of one run), per group of ``group_by`` too.

    Raises:
        EnvbuilderError: no record's task has the field ``group_by``.
    """
    records = list(records)
    if group_by is not None and records:
        check_group_by(group_by, record_fields(records), "the run's tasks")
    outcomes = collections.Counter(outcome_of(r) for r in records)
    reasons = collections.Counter(
        str(r.get("error_reason") or "other") for r in records if outcome_of(r) == "error"
    )
    graded = [r for r in records if is_graded(r)]
    counted = [r for r in records if outcome_of(r) != "void"]
    by_task: dict[tuple[str, int], list[bool]] = collections.defaultdict(list)
    for r in graded:  # like accuracy: an episode the grader did not decide is no failed attempt
        by_task[_task(r)].append(outcome_of(r) == "correct")
    fewest = min((len(v) for v in by_task.values()), default=0)
    pass_at_ci = {
        k: clustered_mean((task, pass_at_k(len(v), sum(v), k)) for task, v in by_task.items())
        for k in _ks(fewest)
    }
    groups: dict[str, Summary] = {}
    if group_by is not None:
        members: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for r in records:
            members[group_of(r, group_by)].append(r)
        groups = {name: summarize(rs) for name, rs in sorted(members.items())}
    return Summary(
        episodes=len(records),
        tasks=len({_task(r) for r in records}),
        outcomes={o: outcomes.get(o, 0) for o in OUTCOMES},
        errors_by_reason=dict(reasons.most_common()),
        reward_all=clustered_mean((_task(r), float(r.get("reward") or 0.0)) for r in counted),
        reward_graded=clustered_mean((_task(r), float(r.get("reward") or 0.0)) for r in graded),
        accuracy=clustered_mean((_task(r), float(outcome_of(r) == "correct")) for r in graded),
        pass_at={k: e.mean or 0.0 for k, e in pass_at_ci.items()},
        pass_at_ci=pass_at_ci,
        turns=sum(int(r.get("turns") or 0) for r in records),
        prompt_tokens=sum(int((r.get("usage") or {}).get("prompt_tokens") or 0) for r in records),
        completion_tokens=sum(int((r.get("usage") or {}).get("completion_tokens") or 0) for r in records),
        groups=groups,
    )


_METHODS = {
    "wilson": "Wilson (a proportion)",
    "wilson, clustered": "Wilson with the effective size of samples clustered by task",
    "bootstrap, clustered": "percentile bootstrap resampling tasks",
}


def interval_methods(s: Summary) -> str:
    """Which interval each row uses, in words (the method is part of the result)."""
    named: dict[str, Estimate] = {
        "mean reward (all)": s.reward_all,
        "mean reward (graded)": s.reward_graded,
        "accuracy": s.accuracy,
        **{f"pass@{k}": v for k, v in s.pass_at_ci.items()},
    }
    by: dict[str, list[str]] = {}
    for name, e in named.items():
        if e.method is not None:
            by.setdefault(_METHODS.get(e.method, e.method), []).append(name)
    text = "; ".join(f"{', '.join(names)}: {how}" for how, names in by.items()) or "none"
    return text + (f"; (few: …) marks intervals over fewer than {FEW} tasks" if _any_few(s) else "")


def _any_few(s: Summary) -> bool:
    return any(e.few for e in (s.reward_all, s.accuracy, *[g.reward_all for g in s.groups.values()]))
