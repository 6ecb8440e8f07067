"""The tables ``envbuilder eval`` prints: the run by outcome, its scores with intervals, per group."""

from __future__ import annotations

from typing import Any

from envbuilder.eval import Estimate, Summary

__all__ = ["estimate", "summary_tables"]


def estimate(e: Estimate, percent: bool = False) -> str:
    """``0.500 [0.172, 0.828]`` (95 % interval), ``-`` when there is nothing to average."""
    if e.mean is None:
        return "-"
    fmt = "{:.1%}" if percent else "{:.3f}"
    if e.low is None or e.high is None:
        return fmt.format(e.mean)
    return f"{fmt.format(e.mean)} [{fmt.format(e.low)}, {fmt.format(e.high)}]"


def _outcomes(s: Summary) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in s.outcomes.items())


def summary_tables(s: Summary, title: str, group_by: str | None) -> list[Any]:
    """The summary table (one metric a row, fits any width) and the per-group table."""
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    per = f" ({s.turns / s.episodes:.1f} per episode)" if s.episodes else ""
    rows = [
        ("episodes (tasks)", f"{s.episodes} ({s.tasks})"),
        ("ended", _outcomes(s)),
        *[(f"  error: {reason}", str(n)) for reason, n in s.errors_by_reason.items()],
        (f"mean reward, all {s.episodes} episodes (none = 0), 95% CI", estimate(s.reward_all)),
        (f"mean reward, {s.graded} graded episodes, 95% CI", estimate(s.reward_graded)),
        ("accuracy of graded, 95% CI", estimate(s.accuracy, percent=True)),
        *[(f"pass@{k}", f"{v:.3f}") for k, v in s.pass_at.items()],
        ("turns", f"{s.turns}{per}"),
        ("tokens prompt / completion", f"{s.prompt_tokens:,} / {s.completion_tokens:,}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    tables = [table]
    if group_by and s.groups:
        groups = Table(title=f"by {group_by}")
        for column in (group_by, "episodes", "mean reward (all), 95% CI", "graded", "accuracy", "errors"):
            groups.add_column(column, justify="left" if column == group_by else "right")
        for name, g in s.groups.items():
            groups.add_row(
                name,
                str(g.episodes),
                estimate(g.reward_all),
                str(g.graded),
                estimate(g.accuracy, percent=True),
                str(g.errors),
            )
        tables.append(groups)
    return tables
