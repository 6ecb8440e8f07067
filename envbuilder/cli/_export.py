"""``envbuilder export verifiers|harbor SPEC OUT``: a spec in another harness's format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._help import Command, Group
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption

export_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="Write a spec in another harness's package format.",
)


@export_app.command("verifiers", cls=Command)
def verifiers(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to export.")],
    out: Annotated[Path, typer.Argument(help="The package folder to write (new or empty).")],
    name: Annotated[
        str | None, typer.Option(help="The package's name, which `vf-eval` takes (default: the spec's name).")
    ] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Write SPEC as a verifiers environment package: `pip install OUT`, then `vf-eval NAME`.

    The package holds the spec's pack (the spec, its data, a lock of their hashes) pinned by its
    sha256, a `load_environment` verifiers calls by name, a pyproject and a README made from the
    catalog entry.
    """
    from envbuilder.integrations import export_verifiers

    with fail_on_errors():
        info = export_verifiers(spec, out, name=name, trust_code=True if trust_code else None)
    typer.echo(
        f"envbuilder: wrote the verifiers package {info.name} into {info.path}\n"
        f"envbuilder: content hash {info.content_hash}\n"
        f"envbuilder: install it with `pip install {info.path}`, run it with `vf-eval {info.module}`"
    )


@export_app.command("harbor", cls=Command)
def harbor(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to export.")],
    out: Annotated[Path, typer.Argument(help="The folder to write the task directories in (new or empty).")],
    split: Annotated[str | None, typer.Option(help="Export this split only (default: every split).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many tasks of each split.")] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Write SPEC's tasks as Harbor task directories (instruction.md, task.toml, environment/,
    tests/, solution/), for specs graded by harbor_tests, unit_tests or repo_tests.
    """
    from envbuilder.integrations import export_harbor

    with fail_on_errors():
        info = export_harbor(spec, out, split=split, limit=limit, trust_code=True if trust_code else None)
    typer.echo(
        f"envbuilder: wrote {len(info.tasks)} Harbor task directories into {info.path} "
        f"(tests from the {info.kind} grader)"
    )
