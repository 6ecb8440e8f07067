#!/usr/bin/env python3
"""What building the container sandbox's image costs, as CI builds it (``.ci/run``).

1. Docker, cold: both images removed from the engine and no kept root filesystem, then
   ``envbuilder sandbox build-image --keep-rootfs`` (debootstrap from the Debian mirror apt
   uses, the import, the build on top).
2. Docker, cached: the same command again (the engine has the image: nothing is built).
3. Podman (``--podman-host``, e.g. ``unix:///run/podman/podman.sock``), from the kept root
   filesystem: its images removed, then the same command with ``--host`` (an import and a
   build, no debootstrap); then again, cached.

Each step is the command in a fresh process (as CI runs it), timed from outside. Needs root
(debootstrap), the engines, and the network to the mirror for the cold step.

    python bench/sandbox_image.py [--podman-host unix:///run/podman/podman.sock]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

from envbuilder.isolation.sandbox import ImageRecipe
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from envbuilder.isolation.sandbox._images import keep_folder


async def remove_images(host: str | None) -> None:
    recipe = ImageRecipe()
    async with Engine(EngineAddress.from_env(host)).connect() as api:
        for tag in (recipe.tag, recipe.rootfs_tag):
            await api.request("DELETE", f"/images/{tag}", params={"force": 1}, missing_ok=True)


def build(host: str | None) -> float:
    argv = [sys.executable, "-m", "envbuilder", "sandbox", "build-image", "--keep-rootfs"]
    if host:
        argv += ["--host", host]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--podman-host", default=None)
    args = ap.parse_args()
    recipe = ImageRecipe()
    kept = keep_folder() / (recipe.rootfs_tag.replace(":", "-") + ".tar")
    kept.unlink(missing_ok=True)
    asyncio.run(remove_images(None))
    rows = [("Docker, cold (debootstrap, import, build)", build(None))]
    rows.append(("Docker, cached", build(None)))
    if args.podman_host:
        asyncio.run(remove_images(args.podman_host))
        rows.append(("Podman, from the kept root filesystem (import, build)", build(args.podman_host)))
        rows.append(("Podman, cached", build(args.podman_host)))
    print(f"{recipe.tag}; load {os.getloadavg()[0]:.1f}")
    print("| step | seconds |")
    print("|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
