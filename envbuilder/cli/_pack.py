"""``envbuilder pack SPEC --out FILE.zip``: bundle a spec, its data and a lock of hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors
from envbuilder.cli._pull import TrustCodeOption


def pack(
    spec: Annotated[Path, typer.Argument(help="The spec file (YAML) to pack.")],
    out: Annotated[Path, typer.Option(help="The pack to write (.zip).")],
    trust_code: TrustCodeOption = False,
) -> None:
    """Bundle SPEC and every file it reads into one .zip that serves exactly as published.

    The pack holds the spec and the bases it extends, its data files and templates, and a lock
    file of their sha256 hashes; `envbuilder serve FILE.zip` refuses it if any file differs.
    """
    from envbuilder.catalog import pack as make_pack

    with fail_on_errors():
        info = make_pack(spec, out, trust_code=True if trust_code else None)
    typer.echo(
        f"envbuilder: packed {info.name} ({info.files} files, {info.bytes:,} bytes) into {info.path}\n"
        f"envbuilder: content hash {info.content_hash}"
    )
