"""``envbuilder validate SPEC...``: report every problem of each spec, schema and data alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli import _console
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption, TrustedKeyOption, spec_of

SpecsArg = Annotated[
    list[Path],
    typer.Argument(
        help="Spec files (YAML) or packs (.zip) to validate.", exists=True, dir_okay=False, show_default=False
    ),
]


def validate(
    specs: SpecsArg, trusted_key: TrustedKeyOption = None, trust_code: TrustCodeOption = False
) -> None:
    """Check each SPEC against the schema and its data; exit 1 when any has a problem.

    A spec's own code (`function` and `mcp` tools) is loaded to be checked only from your own
    folders; a pack's only with --trust-code, or a signature that --trusted-key verifies.
    """
    from envbuilder.authoring import Validation, validate_spec
    from envbuilder.errors import EnvbuilderError, Problem

    invalid = 0
    for path in specs:
        try:
            spec, signed = spec_of(path, trusted_key=trusted_key)
        except EnvbuilderError as exc:  # a pack that cannot be opened: its one problem
            result = Validation(str(path), [Problem(exc.code, exc.message, file=str(path), hint=exc.hint)])
        else:
            with fail_on_errors():
                result = validate_spec(spec, trust_code=True if trust_code or signed else None)
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
