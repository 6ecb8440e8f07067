"""The sandbox image's recipe: its tags, the mirror it is built from, the root filesystem's
hardening, and a build that finds the image in a real engine does nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import ImageRecipe, build_image, default_image
from envbuilder.isolation.sandbox._images import REQUIRED, _harden, apt_mirror
from tests.sandboxes import engine_host


def test_tags_are_hashes_of_the_recipe() -> None:
    recipe = ImageRecipe()
    assert default_image() == recipe.tag == ImageRecipe().tag
    assert recipe.tag.startswith("envbuilder-sandbox:bookworm-")
    assert recipe.rootfs_tag.startswith("envbuilder-rootfs:bookworm-")
    assert recipe.dockerfile_text().startswith(f"FROM {recipe.rootfs_tag}\n")
    more = ImageRecipe(packages=("python3", "git"))
    assert more.rootfs_tag != recipe.rootfs_tag and more.tag != recipe.tag
    other = ImageRecipe(dockerfile=recipe.dockerfile + "ENV X=1\n")
    assert other.rootfs_tag == recipe.rootfs_tag and other.tag != recipe.tag  # the base is reused
    assert ImageRecipe(suite="trixie").tag.startswith("envbuilder-sandbox:trixie-")


def test_the_mirror_is_the_one_apt_uses(tmp_path: Path) -> None:
    (tmp_path / "apt" / "sources.list.d").mkdir(parents=True)
    assert apt_mirror("bookworm", tmp_path) == "http://deb.debian.org/debian"
    (tmp_path / "apt" / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n"
        "# a comment\n"
        "URIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n"
        "\n"
        "Types: deb deb-src\n"
        "URIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.example/debian"
    (tmp_path / "apt" / "sources.list").write_text(
        "# old style\ndeb [arch=amd64] http://old.example/debian trixie main\n"
    )
    assert apt_mirror("trixie", tmp_path) == "http://old.example/debian"
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.example/debian"


def test_the_root_filesystem_loses_setuid_bits_and_must_hold_the_set_ups_commands(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    for command in REQUIRED:
        (tmp_path / "usr" / "bin" / command).write_text("")
    su = tmp_path / "usr" / "bin" / "su"
    su.write_text("")
    su.chmod(0o4755)
    _harden(tmp_path)
    assert stat.S_IMODE(su.stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "work").stat().st_mode) == 0o1777
    os.unlink(tmp_path / "usr" / "bin" / "setpriv")
    with pytest.raises(SandboxError, match="the root filesystem lacks setpriv"):
        _harden(tmp_path)


async def test_a_build_the_engine_has_is_skipped() -> None:
    report = await build_image(host=engine_host("docker"))
    assert report.tag == default_image() and report.steps == [(default_image(), "cached", 0.0)]
    assert 50e6 < report.size < 400e6
