"""``envbuilder pack SPEC --out FILE.zip``: bundle a spec, its data and a lock of hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors


def pack(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to pack.")],
    out: Annotated[Path, typer.Option(help="The pack to write (.zip).")],
) -> None:
    """Bundle SPEC, its data files and a lock file of sha256 hashes into one .zip that
    `envbuilder serve FILE.zip` serves exactly as published."""
    from envbuilder.catalog import pack as make_pack

    with fail_on_errors():
        info = make_pack(spec, out)
    typer.echo(
        f"envbuilder: packed {info.name} ({info.files} files, {info.bytes:,} bytes) into {info.path}\n"
        f"envbuilder: content hash {info.content_hash}"
    )
