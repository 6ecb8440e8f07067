"""``envbuilder eval regrade RUN --spec NEW``: re-grade a stored run under another spec, without the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption

#: Changed episodes listed in the table (all of them are in --json and the new results file).
SHOWN = 10


def regrade(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A results file of `envbuilder eval --out`.")],
    spec: Annotated[Path, typer.Option(help="The new version of the environment's spec.")],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the regraded run (default: RUN.regraded.jsonl).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the changes and scores as JSON.")] = False,
    trust_code: TrustCodeOption = False,
) -> None:
    """Replay RUN's answers on SPEC's graders: which episodes' rewards changed, and the new score."""
    from envbuilder.cli._console import line, table
    from envbuilder.environment import load_environment
    from envbuilder.eval._regrade import regrade_run

    target = out or run.with_name(run.stem + ".regraded.jsonl")
    with fail_on_errors():
        if target.resolve() == run.resolve():
            raise_same(run)
        import asyncio  # here: `envbuilder --help` builds every command

        r = asyncio.run(
            regrade_run(run, load_environment(spec, trust_code=True if trust_code else None), target)
        )
    if as_json:
        typer.echo(json.dumps({
            "regraded_from": r.header.regraded_from, "run_id": r.header.run_id,
            "replayed": r.replayed, "changes": [c.to_dict() for c in r.changes],
            "before": r.before.to_dict(), "after": r.after.to_dict(), "out": str(target),
        }, indent=2))  # fmt: skip
        return
    line(f"envbuilder: replayed {r.replayed} of {r.before.episodes} episodes on {spec} (no model calls)")
    rows = [
        (f"{c.split}[{c.index}]" + (f" #{c.sample}" if c.sample else ""), c.task_id or "-",
         f"{c.before[0]} ({_reward(c.before[1])})", f"{c.after[0]} ({_reward(c.after[1])})")
        for c in r.changes[:SHOWN]
    ]  # fmt: skip
    if rows:
        more = f", the first {SHOWN} shown" if len(r.changes) > SHOWN else ""
        table(
            ("episode", "task", "before", "after"), rows, title=f"{len(r.changes)} episode(s) changed{more}"
        )
    else:
        line("envbuilder: no episode's grade changed")
    table(
        ("", "before", "after"),
        [
            ("mean reward, all episodes, 95% CI", r.before.reward_all.format(), r.after.reward_all.format()),
            ("accuracy of graded, 95% CI", r.before.accuracy.format(percent=True),
             r.after.accuracy.format(percent=True)),
            ("ungradeable", str(r.before.outcomes["ungradeable"]), str(r.after.outcomes["ungradeable"])),
        ],
        title=f"run {r.header.regraded_from} regraded as {r.header.run_id}",
    )  # fmt: skip
    line(f"envbuilder: the regraded run is in {target}; view with `envbuilder view {target}`")


def raise_same(run: Path) -> None:
    from envbuilder.errors import EnvbuilderError

    raise EnvbuilderError(
        f"--out {run}: the regraded run would overwrite the stored one", hint="Give another --out"
    )


def _reward(value: float | None) -> str:
    return "no reward" if value is None else f"{value:g}"
