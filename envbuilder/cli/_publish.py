"""``envbuilder publish SPECS… DEST``: packs, locks, catalog.json and the site, to a folder, bucket or Hub."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption


def publish(
    specs: Annotated[
        list[Path], typer.Argument(help="Spec files (YAML) or folders of specs.", show_default=False)
    ],
    dest: Annotated[
        str,
        typer.Argument(
            help="A folder, s3://BUCKET/PREFIX (AWS_ENDPOINT_URL for S3-compatible stores), "
            "gs://BUCKET/PREFIX, or hf://datasets/OWNER/NAME.",
            show_default=False,
        ),
    ],
    sign_key: Annotated[
        Path | None,
        typer.Option(help="Sign each new pack's lock with this Ed25519 private key (PEM)."),
    ] = None,
    trust_code: TrustCodeOption = False,
) -> None:
    """Publish the environments of SPECS (packs, catalog.json, site) to a folder, bucket or Hub repo.

    Publishing again uploads only what changed and keeps every version listed in the catalog servable.
    """
    from envbuilder.catalog import find_specs
    from envbuilder.catalog import publish as run

    with fail_on_errors():
        report = run(find_specs(specs), dest, sign_key=sign_key, trust_code=True if trust_code else None)
    for name in report.uploaded:
        typer.echo(f"  uploaded  {name}")
    typer.echo(
        f"envbuilder: published {', '.join(report.environments)} to {report.url} "
        f"({len(report.uploaded)} file(s) uploaded, {len(report.unchanged)} unchanged)"
    )
    typer.echo(f"envbuilder: serve with: envbuilder serve {report.catalog_url}")
