"""The tables ``envbuilder eval`` prints: the run by outcome, its scores with intervals, per group."""

from __future__ import annotations

from envbuilder.cli._console import line, table
from envbuilder.eval import Summary
from envbuilder.eval._results import interval_methods

__all__ = ["print_suite", "print_summary"]


def _outcomes(s: Summary) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in s.outcomes.items())


def print_summary(s: Summary, title: str, group_by: str | None) -> None:
    """The summary (one metric a row, fits any width) and the per-group table."""
    per = f" ({s.turns / s.episodes:.1f} per episode)" if s.episodes else ""
    rows = [
        ("episodes (tasks)", f"{s.episodes} ({s.tasks})"),
        ("ended", _outcomes(s)),
        *[(f"  error: {reason}", str(n)) for reason, n in s.errors_by_reason.items()],
        (f"{s.reward_all_label}, 95% CI", s.reward_all.format()),
        (f"mean reward, {s.graded} graded episodes, 95% CI", s.reward_graded.format()),
        ("accuracy of graded, 95% CI", s.accuracy.format(percent=True)),
        *[(f"pass@{k} of graded, 95% CI", v.format()) for k, v in s.pass_at_ci.items()],
        ("turns", f"{s.turns}{per}"),
        ("tokens prompt / completion", f"{s.prompt_tokens:,} / {s.completion_tokens:,}"),
    ]
    table(("metric", "value"), rows, title=title)
    line(f"envbuilder: 95% intervals: {interval_methods(s)}")
    if group_by and s.groups:
        headers = (group_by, "episodes", "mean reward (all), 95% CI", "graded", "accuracy", "errors")
        group_rows = [
            (name, str(g.episodes), g.reward_all.format(), str(g.graded), g.accuracy.format(percent=True),
             str(g.errors))
            for name, g in s.groups.items()
        ]  # fmt: skip
        table(headers, group_rows, title=f"by {group_by}")


def print_suite(summaries: dict[str, Summary], model: str) -> None:
    """One row per environment and the macro mean (each environment weighs the same)."""
    from envbuilder.eval._suite import macro_mean

    headers = ("environment", "episodes", "mean reward (all), 95% CI", "accuracy of graded", "errors")
    rows = [
        (name, str(s.episodes), s.reward_all.format(), s.accuracy.format(percent=True), str(s.errors))
        for name, s in summaries.items()
    ]
    macro = macro_mean(summaries)
    rows.append(("macro mean", str(sum(s.episodes for s in summaries.values())),
                 "-" if macro is None else f"{macro:.3f}", "", ""))  # fmt: skip
    table(headers, rows, title=f"{model} on {len(summaries)} environments")
