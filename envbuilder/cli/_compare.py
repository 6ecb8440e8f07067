"""``envbuilder eval compare A B``: B − A on the tasks both runs ran, with paired 95 % intervals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors


def compare(
    a: Annotated[Path, typer.Argument(metavar="A", help="The baseline run's results file (JSONL).")],
    b: Annotated[Path, typer.Argument(metavar="B", help="The other run's results file.")],
    group_by: Annotated[str | None, typer.Option(help="Also compare per value of this task field.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare two runs of one environment on the tasks both graded: the difference in mean reward
    and whether it is real (void and errored episodes are left out, never scored 0)."""
    from envbuilder.cli._console import line, table
    from envbuilder.eval._compare import compare_runs

    with fail_on_errors():
        c = compare_runs(a, b, group_by=group_by)
    if as_json:
        typer.echo(json.dumps(c.to_dict(), indent=2))
        return
    rows = []
    for name, d in [("all", c.overall), *c.groups.items()]:
        verdict = "yes" if d.significant else ("no" if d.diff.stderr is not None else "-")
        rows.append((name, str(d.tasks), _num(d.a), _num(d.b), d.diff.format(), verdict))
    title = f"B − A: {c.b.run.model} (B) vs {c.a.run.model} (A) on {c.a.run.env}"
    table((group_by or "", "tasks", "A", "B", "B − A, 95% CI", "real?"), rows, title=title)
    skipped = c.left_out()
    if skipped:
        line(f"left out: {'; '.join(skipped)}")
    for note in c.notes:
        line(f"note: {note}")
    overall = c.overall
    word = "a real difference" if overall.significant else "no difference distinguishable from 0"
    line(f"{word} at 95% (paired over the {overall.tasks} tasks graded in both runs)")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
