"""``envbuilder sandbox build-image``: the container sandbox's image, from Debian's packages."""

from __future__ import annotations

from typing import Annotated

import typer

from envbuilder.cli._help import Command, Group
from envbuilder.cli._output import fail_on_errors

sandbox_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="The code sandbox's container image (`ENVBUILDER_SANDBOX=docker`).",
)


@sandbox_app.command("build-image", cls=Command)
def build_image(
    suite: Annotated[str, typer.Option(help="The Debian release to build from.")] = "bookworm",
    mirror: Annotated[
        str | None, typer.Option(help="The Debian mirror (default: the one apt uses, else deb.debian.org).")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="The engine, e.g. unix:///run/podman/podman.sock (default: $DOCKER_HOST)."),
    ] = None,
    keep_rootfs: Annotated[
        bool,
        typer.Option(
            "--keep-rootfs",
            help="Keep the root filesystem's tar in the cache folder (so another engine skips debootstrap).",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Build again even when the engine has it.")] = False,
    base: Annotated[
        bool,
        typer.Option(
            "--base",
            help="Build the base of session images instead (python3 and git), tagged "
            "envbuilder-base:<suite> (a `sandbox: build:` Dockerfile's FROM).",
        ),
    ] = False,
) -> None:
    """Build the Docker backend's sandbox image into the engine: a Debian minbase root filesystem
    with Python (debootstrap, which needs root) imported, and the sandbox's image on top.

    Both are tagged with a hash of their recipe and skipped when the engine has them. Prints the
    image's tag (set ENVBUILDER_SANDBOX_IMAGE to it when --suite is not the default).
    """
    from envbuilder.isolation.sandbox import BASE_PACKAGES, ImageRecipe, alias_image, base_image
    from envbuilder.isolation.sandbox import build_image as build
    from envbuilder.isolation.sandbox._images import keep_folder

    recipe = ImageRecipe(suite=suite, packages=BASE_PACKAGES) if base else ImageRecipe(suite=suite)
    with fail_on_errors():
        import asyncio  # here: `envbuilder --help` builds every command

        report = asyncio.run(
            build(
                recipe,
                host=host,
                mirror=mirror,
                keep_rootfs=keep_folder() if keep_rootfs else None,
                force=force,
                say=lambda text: typer.echo(text, err=True),
            )
        )
        if base:
            import asyncio  # here: `envbuilder --help` builds every command

            asyncio.run(alias_image(report.tag, base_image(suite), host=host))
    for image, how, seconds in report.steps:
        typer.echo(f"{image}: {how}" + (f" in {seconds:.1f} s" if how != "cached" else ""), err=True)
    typer.echo(f"{base_image(suite) if base else report.tag} ({report.size / 1e6:.0f} MB)")
