"""``envbuilder pull URL``: download a published catalog's packs (or a pack) into the cache, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors

EnvOption = Annotated[
    list[str] | None,
    typer.Option("--env", help="NAME or NAME@VERSION to take from a catalog (repeatable; default: all)."),
]
RequireSignatureOption = Annotated[
    bool,
    typer.Option("--require-signature", help="Refuse any pack whose lock is not signed by --trusted-key."),
]
TrustedKeyOption = Annotated[
    Path | None,
    typer.Option(
        help="Ed25519 public key (PEM) that checks pack signatures; a pack it verifies may run its own code."
    ),
]
TrustCodeOption = Annotated[
    bool,
    typer.Option(
        "--trust-code",
        help="Let specs and packs from outside your own folders (packs, catalogs, the cache) run "
        "their own code: `function` modules and `mcp` tools. Only for sources you trust.",
    ),
]


def resolve_targets(
    targets: list[str],
    *,
    envs: list[str] | None,
    cache_dir: Path | None,
    trusted_key: Path | None,
    require_signature: bool,
) -> tuple[list[Path], list[Path]]:
    """Local paths to serve for ``targets``, and those of them whose signature the trusted key
    verified: a catalog (``*.json``, at a URL or on disk) or a pack at a URL is pulled and
    verified into the cache; with a signature policy, local packs too."""
    from envbuilder.catalog import TrustPolicy, is_pack, pull
    from envbuilder.data._remote import is_url

    with fail_on_errors():
        trust = TrustPolicy(trusted_key, require_signature=require_signature)
        out: list[Path] = []
        signed: list[Path] = []
        for target in targets:
            catalog = target.lower().endswith(".json")  # a published catalog on a local disk
            if is_url(target) or catalog or (is_pack(Path(target)) and (trusted_key or require_signature)):
                for p in pull(target, envs=envs, cache_dir=cache_dir, trust=trust):
                    out.append(p.pack)
                    if p.signed:
                        signed.append(p.pack)
            elif require_signature:
                typer.echo(f"error: {target} is not a signed pack (--require-signature)", err=True)
                raise typer.Exit(1)
            else:
                out.append(Path(target))
    return out, signed


def spec_of(path: Path, *, trusted_key: Path | None, cache_dir: Path | None = None) -> tuple[Path, bool]:
    """The spec file to load for ``path`` (a pack is extracted into the cache and checked
    against its lock) and whether its lock's signature verified with ``trusted_key``.

    Raises:
        DataError: the pack is unreadable, malformed, or its signature does not verify.
    """
    from envbuilder.catalog import TrustPolicy, is_pack, open_pack
    from envbuilder.catalog import pull as run

    if not is_pack(path):
        return path, False
    signed = trusted_key is not None and any(
        p.signed for p in run(str(path), cache_dir=cache_dir, trust=TrustPolicy(trusted_key))
    )
    return open_pack(path, cache_dir=cache_dir), signed


def pull(
    url: Annotated[
        str, typer.Argument(help="A catalog.json or a pack (.zip): https://, s3://, gs://, hf:// or a path.")
    ],
    env: EnvOption = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(help="The cache folder (default: $ENVBUILDER_CACHE_DIR or ~/.cache/envbuilder)."),
    ] = None,
    trusted_key: TrustedKeyOption = None,
    require_signature: RequireSignatureOption = False,
) -> None:
    """Download the packs published at URL into the cache and verify them.

    `envbuilder serve URL` then starts from the cache, offline if need be.
    """
    from envbuilder.catalog import TrustPolicy
    from envbuilder.catalog import pull as run

    with fail_on_errors():
        pulled = run(
            url,
            envs=env,
            cache_dir=cache_dir,
            trust=TrustPolicy(trusted_key, require_signature=require_signature),
        )
    for p in pulled:
        typer.echo(f"envbuilder: pulled {p.name}@{p.version} into {p.pack} (verified)")
