"""``envbuilder validate SPEC...``: report every problem of each spec, schema and data alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli import _console
from envbuilder.cli._output import fail_on_errors

SpecsArg = Annotated[
    list[Path],
    typer.Argument(help="Spec files (YAML) to validate.", exists=True, dir_okay=False, show_default=False),
]


def validate(specs: SpecsArg) -> None:
    """Check each SPEC against the schema and its data; exit 1 when any has a problem."""
    from envbuilder.authoring import validate_spec

    invalid = 0
    for path in specs:
        with fail_on_errors():
            result = validate_spec(path)
        if result.ok:
            assert result.env is not None
            _console.line(f"{path}: valid ({result.env.summary()} tasks)", "green")
            continue
        invalid += 1
        _console.problems(result.problems)
        n = len(result.problems)
        _console.line(f"{path}: {n} problem{'s' if n != 1 else ''}", "bold red")
        if result.skipped:
            _console.line(
                f"{path}: checks that need {', '.join(result.skipped)} were skipped until"
                f" {'it is' if len(result.skipped) == 1 else 'they are'} fixed",
                "yellow",
            )
    if invalid:
        raise typer.Exit(1)
