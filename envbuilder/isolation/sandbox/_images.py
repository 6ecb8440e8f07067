"""The container sandbox's image, built from the distribution's packages (no registry needed).

Two steps, each an image tagged with a content hash of its recipe (so an unchanged recipe is
built once per engine, and a changed one is a new tag, never a stale image under an old name):

1. the root filesystem: ``debootstrap --variant=minbase --include=python3`` (Debian's smallest
   system: sh, bash, coreutils, tar, util-linux's ``setpriv`` and ``prlimit``) from the mirror
   apt uses, with apt's caches and the documentation removed (each package's copyright is
   kept), setuid and setgid bits stripped, and checked to hold every command the backend's
   set-up uses (:data:`REQUIRED`); imported into the engine (``POST /images/create?fromSrc=-``)
   as ``envbuilder-rootfs:<suite>-<hash>``;
2. the sandbox on top of it (``POST /build``, :data:`DOCKERFILE`) as
   ``envbuilder-sandbox:<suite>-<hash>``, the default image of the Docker backend. Its
   Dockerfile has no ``RUN`` (the work is done on the root filesystem), so the build starts
   no container: it takes a second on any engine, and works where a build container cannot
   start (Podman as a root without CAP_SYS_RESOURCE cannot set a build container's rlimits).

``envbuilder sandbox build-image`` runs this (as root: debootstrap needs it); with
``keep_rootfs`` the root filesystem's tar stays in the cache folder, so another engine
(Podman beside Docker) or a rebuild after a prune skips debootstrap.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress, EngineClient

RECIPE_VERSION = 2
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Besides minbase (which holds sh, bash, coreutils, tar and util-linux).
PACKAGES = ("python3",)
#: Removed from the root filesystem before it is imported (globs under its root).
CLEANUP = (
    "var/cache/apt/archives/*.deb",
    "var/cache/apt/*.bin",
    "var/lib/apt/lists/*",
    "var/log/*",
    "usr/share/man/*",
    "usr/share/info/*",
    "usr/share/locale/*",
    "usr/share/doc/*/[!c]*",  # each package's copyright stays
    "usr/share/doc/*/changelog*",
)
DOCKERFILE = """\
FROM {base}
ENV LANG=C.UTF-8
LABEL envbuilder.recipe="{key}"
CMD ["python3"]
"""
#: What the Docker backend's set-up runs (besides the run's own command).
REQUIRED = ("sh", "bash", "tar", "env", "nice", "timeout", "setpriv", "prlimit", "python3")


@dataclass(frozen=True)
class ImageRecipe:
    """What the sandbox image is made of; its tags are content hashes of these fields."""

    suite: str = DEFAULT_SUITE
    packages: tuple[str, ...] = PACKAGES
    cleanup: tuple[str, ...] = CLEANUP
    dockerfile: str = DOCKERFILE

    def _hash(self, *parts: object) -> str:
        text = json.dumps([RECIPE_VERSION, *parts], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def rootfs_tag(self) -> str:
        return f"envbuilder-rootfs:{self.suite}-{self._hash(self.suite, self.packages, self.cleanup)}"

    @property
    def tag(self) -> str:
        key = self._hash(self.rootfs_tag, self.dockerfile)
        return f"envbuilder-sandbox:{self.suite}-{key}"

    def dockerfile_text(self) -> str:
        return self.dockerfile.format(base=self.rootfs_tag, key=self.tag)


def default_image() -> str:
    """The tag of the image ``envbuilder sandbox build-image`` builds by default."""
    return ImageRecipe().tag


@dataclass
class ImageBuild:
    """What :func:`build_image` did: each step's image, whether it was cached, and its time."""

    tag: str
    steps: list[tuple[str, str, float]] = field(default_factory=list)
    """(image, ``cached`` / ``built`` / ``imported``, seconds)."""
    size: int = 0
    """The image's size in bytes, as the engine reports it."""


async def build_image(
    recipe: ImageRecipe | None = None,
    *,
    host: str | None = None,
    mirror: str | None = None,
    keep_rootfs: Path | None = None,
    force: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> ImageBuild:
    """Make sure ``engine`` holds the sandbox image of ``recipe`` (build what it lacks).

    Args:
        recipe: What to build (default: :class:`ImageRecipe`'s defaults).
        host: The engine the image goes to (default: ``$DOCKER_HOST``, else the local Docker).
        mirror: The Debian mirror (default: the one apt uses for the suite, else deb.debian.org).
        keep_rootfs: A folder to keep the root filesystem's tar in (and to take it from).
        force: Build both steps again even when the engine has them.
        say: Called with a line of progress for each step.

    Raises:
        SandboxError: the engine refused, or debootstrap is missing or failed.
    """
    recipe = recipe or ImageRecipe()
    report = ImageBuild(tag=recipe.tag)
    async with Engine(EngineAddress.from_env(host)).connect() as api:
        if not force and (found := await api.image(recipe.tag)) is not None:
            report.steps.append((recipe.tag, "cached", 0.0))
            report.size = int(found.get("Size") or 0)
            return report
        started = time.monotonic()
        if force or await api.image(recipe.rootfs_tag) is None:
            how = await _import_rootfs(api, recipe, mirror, keep_rootfs, say)
            report.steps.append((recipe.rootfs_tag, how, time.monotonic() - started))
        else:
            report.steps.append((recipe.rootfs_tag, "cached", 0.0))
        started = time.monotonic()
        say(f"building {recipe.tag} on {recipe.rootfs_tag}")
        await _build(api, recipe)
        report.steps.append((recipe.tag, "built", time.monotonic() - started))
        found = await api.image(recipe.tag)
        report.size = int((found or {}).get("Size") or 0)
    return report


async def _import_rootfs(
    api: EngineClient, recipe: ImageRecipe, mirror: str | None, keep: Path | None, say: Callable[[str], None]
) -> str:
    """Import the root filesystem (from the kept tar, else from a fresh debootstrap)."""
    name = recipe.rootfs_tag.replace(":", "-") + ".tar"
    kept = keep / name if keep is not None else None
    if kept is not None and kept.is_file():
        say(f"importing {recipe.rootfs_tag} from {kept}")
        await _import(api, kept, recipe.rootfs_tag)
        return "imported"
    with tempfile.TemporaryDirectory(prefix="envbuilder-rootfs-") as tmp:
        root, tar = Path(tmp) / "root", Path(tmp) / name
        url = mirror or apt_mirror(recipe.suite)
        say(f"debootstrap {recipe.suite} from {url} (minbase + {', '.join(recipe.packages)})")
        await asyncio.to_thread(_debootstrap, recipe, root, url)
        await asyncio.to_thread(_pack_rootfs, root, tar)
        say(f"importing {recipe.rootfs_tag} ({tar.stat().st_size / 1e6:.0f} MB)")
        await _import(api, tar, recipe.rootfs_tag)
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(tar, kept)
    return "built"


def _debootstrap(recipe: ImageRecipe, root: Path, mirror: str) -> None:
    tool = shutil.which("debootstrap") or shutil.which("debootstrap", path="/usr/sbin:/sbin")
    if tool is None:
        raise SandboxError(
            "building the sandbox image needs debootstrap, which is not installed",
            hint="apt-get install debootstrap (as root)",
        )
    argv = [
        tool,
        "--variant=minbase",
        f"--include={','.join(recipe.packages)}",
        recipe.suite,
        str(root),
        mirror,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise SandboxError(
            f"debootstrap {recipe.suite} failed (exit {done.returncode}): {' / '.join(tail)[:500]}",
            hint="It must run as root and reach the mirror; pass another with --mirror",
        )
    for pattern in recipe.cleanup:
        for path in root.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    _harden(root)


def _harden(root: Path) -> None:
    """No setuid or setgid file (the sandbox sets no-new-privileges too: two locks), an empty
    ``/work`` (the tmpfs mount point), and every command of :data:`REQUIRED` there."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
    (root / "work").mkdir(exist_ok=True)
    os.chmod(root / "work", 0o1777)
    folders = ("usr/local/bin", "usr/bin", "bin", "usr/sbin", "sbin")
    missing = [c for c in REQUIRED if not any(os.path.lexists(root / f / c) for f in folders)]
    if missing:
        raise SandboxError(
            f"the root filesystem lacks {', '.join(missing)}, which the sandbox needs",
            hint="Add their packages to the recipe's packages",
        )


def _pack_rootfs(root: Path, tar: Path) -> None:
    """The root filesystem as a tar with numeric owners (GNU tar keeps devices and modes)."""
    done = subprocess.run(
        ["tar", "--numeric-owner", "-C", str(root), "-cf", str(tar), "."],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxError(f"the root filesystem could not be packed: {done.stderr.strip()[:300]}")


async def _import(api: EngineClient, tar: Path, tag: str) -> None:
    response = await api.request(
        "POST",
        "/images/create",
        params={"fromSrc": "-", "repo": tag},
        content=_chunks(tar),
        headers={"Content-Type": "application/x-tar"},
        timeout=None,
    )
    assert response is not None
    _check_progress(response.text, f"importing {tag}")


async def _build(api: EngineClient, recipe: ImageRecipe) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as context:
        text = recipe.dockerfile_text().encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(text)
        context.addfile(info, io.BytesIO(text))
    response = await api.request(
        "POST",
        "/build",
        params={"t": recipe.tag, "rm": 1, "forcerm": 1, "networkmode": "none"},
        content=buf.getvalue(),
        headers={"Content-Type": "application/x-tar"},
        timeout=None,
    )
    assert response is not None
    _check_progress(response.text, f"building {recipe.tag}")


def _check_progress(text: str, what: str) -> None:
    """The engine streams JSON lines of progress; a line with ``error`` means it failed."""
    for line in text.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("error"):
            raise SandboxError(f"{what} failed: {str(message['error']).strip()[:500]}")


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as f:
        while chunk := await asyncio.to_thread(f.read, 1 << 20):
            yield chunk


def apt_mirror(suite: str, etc: Path = Path("/etc")) -> str:
    """The Debian mirror apt uses for ``suite`` (``etc``'s ``apt/sources.list`` and
    ``apt/sources.list.d``), else deb.debian.org."""
    candidates: list[Path] = [etc / "apt" / "sources.list"]
    folder = etc / "apt" / "sources.list.d"
    if folder.is_dir():
        candidates += sorted(folder.glob("*.sources")) + sorted(folder.glob("*.list"))
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for uri, suites in _entries(text, deb822=path.suffix == ".sources"):
            if suite in suites and not uri.rstrip("/").endswith("-security"):
                return uri
    return DEFAULT_MIRROR


def _entries(text: str, *, deb822: bool) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    if deb822:
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (
                    line.partition(":") for line in stanza.splitlines() if not line.startswith("#")
                )
            )
            if "deb" in fields.get("types", "").split() and fields.get("uris"):
                out += [(uri, fields.get("suites", "").split()) for uri in fields["uris"].split()]
        return out
    for line in text.splitlines():
        words = [w for w in re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()]
        if len(words) >= 3 and words[0] == "deb":
            out.append((words[1], [words[2]]))
    return out


def keep_folder() -> Path:
    """Where ``--keep-rootfs`` keeps root filesystems (in envbuilder's cache folder)."""
    from envbuilder.paths import cache_dir

    return cache_dir() / "sandbox"
