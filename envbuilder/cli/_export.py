"""``envbuilder export verifiers|harbor SPEC OUT``: a spec in another harness's format (``OUT``
also as ``--out``, as the other commands that write take it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._help import Command, Group
from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption

OutOption = Annotated[
    Path | None, typer.Option("--out", "-o", help="OUT as an option (as `pack` and `init` take it).")
]


def _out(out: Path | None, option: Path | None) -> Path:
    """The folder to write, given as ``OUT`` or ``--out`` (not two different ones)."""
    if out is not None and option is not None and out != option:
        raise typer.BadParameter(f"two folders to write: {out} and --out {option}", param_hint="OUT / --out")
    chosen = out if out is not None else option
    if chosen is None:
        raise typer.BadParameter("give the folder to write, as OUT or --out", param_hint="OUT")
    return chosen


export_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="Write a spec in another harness's package format.",
)


@export_app.command("verifiers", cls=Command)
def verifiers(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to export.")],
    out: Annotated[Path | None, typer.Argument(help="The package folder to write (new or empty).")] = None,
    out_option: OutOption = None,
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
        folder = _out(out, out_option)
        info = export_verifiers(spec, folder, name=name, trust_code=True if trust_code else None)
    typer.echo(
        f"envbuilder: wrote the verifiers package {info.name} into {info.path}\n"
        f"envbuilder: content hash {info.content_hash}\n"
        f"envbuilder: install it with `pip install {info.path}`, run it with `vf-eval {info.module}`"
    )


@export_app.command("harbor", cls=Command)
def harbor(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to export.")],
    out: Annotated[
        Path | None, typer.Argument(help="The folder to write the task directories in (new or empty).")
    ] = None,
    out_option: OutOption = None,
    split: Annotated[str | None, typer.Option(help="Export this split only (default: every split).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many tasks of each split.")] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Write SPEC's tasks as Harbor task directories (instruction.md, task.toml, environment/,
    tests/, solution/), for specs graded by harbor_tests, unit_tests or repo_tests.
    """
    from envbuilder.integrations import export_harbor

    with fail_on_errors():
        folder = _out(out, out_option)
        info = export_harbor(spec, folder, split=split, limit=limit, trust_code=True if trust_code else None)
    typer.echo(
        f"envbuilder: wrote {len(info.tasks)} Harbor task directories into {info.path} "
        f"(tests from the {info.kind} grader)"
    )
