"""A spec's session image, built from its Dockerfile and context on the engine (once per content).

The tag is ``envbuilder-session:<hash>`` of the Dockerfile and every file of the context, so an
unchanged spec builds once per engine and a changed one never runs a stale image. There is no
registry: the Dockerfile's ``FROM`` is an image the engine has (``envbuilder-base:bookworm``,
which ``.ci/run`` builds with debootstrap). The build has no network (``networkmode=none``).

A task's own image (``build: context_field:``, Harbor's ``environment/``) is built the same way
by :func:`build_task_image`, except that a ``FROM`` naming an image the engine lacks (Harbor
tasks name registry images such as ``ubuntu:24.04``) is read as the local base: the Dockerfile is
rewritten before it is hashed, and the rewrites are logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._engine import Engine

if TYPE_CHECKING:
    from envbuilder.spec import ImageBuildSpec

log = logging.getLogger("envbuilder.isolation.sandbox")

_MAX_CONTEXT = 256 * 1024 * 1024
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.I | re.M)
#: The packages of the base image (besides Debian's minbase): a repository needs git.
BASE_PACKAGES = ("python3", "git")


def base_image(suite: str = "bookworm") -> str:
    """The base of session images: ``envbuilder-base:<suite>`` (``sandbox build-image --base``)."""
    return f"envbuilder-base:{suite}"


async def alias_image(source: str, target: str, *, host: str | None = None) -> None:
    """Tag image ``source`` as ``target`` too (``POST /images/{source}/tag``)."""
    from envbuilder.isolation.sandbox._engine import EngineAddress

    repo, _, tag = target.rpartition(":")
    async with Engine(EngineAddress.from_env(host)).connect() as api:
        await api.request("POST", f"/images/{source}/tag", params={"repo": repo, "tag": tag})


def context_tar(dockerfile: Path, context: Path, text: bytes | None = None) -> tuple[bytes, str]:
    """The build context as a tar (the Dockerfile as ``Dockerfile``, or ``text`` in its place)
    and its content hash."""
    if not dockerfile.is_file():
        raise SandboxError(f"the sandbox's Dockerfile {dockerfile} does not exist")
    if not context.is_dir():
        raise SandboxError(f"the sandbox's build context {context} is not a folder")
    digest = hashlib.sha256()
    buf = io.BytesIO()
    size = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(p for p in context.rglob("*") if p.is_file() and not p.is_symlink()):
            name = path.relative_to(context).as_posix()
            if name == "Dockerfile":
                continue
            data = path.read_bytes()
            size += len(data)
            if size > _MAX_CONTEXT:
                raise SandboxError(f"the sandbox's build context {context} is larger than 256 MiB")
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        text = dockerfile.read_bytes() if text is None else text
        digest.update(b"Dockerfile\0" + hashlib.sha256(text).digest())
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return buf.getvalue(), digest.hexdigest()[:16]


async def build_session_image(engine: Engine, build: ImageBuildSpec, base_dir: Path) -> str:
    """The tag of the spec's session image, built now when the engine lacks it.

    Raises:
        SandboxError: the files are missing, or the engine's build failed (its message).
    """
    assert build.dockerfile is not None
    payload, key = await asyncio.to_thread(context_tar, base_dir / build.dockerfile, base_dir / build.context)
    return await _build(engine, payload, key, build.dockerfile)


def local_from(dockerfile: str, present: set[str], base: str) -> tuple[str, list[str]]:
    """``dockerfile`` with each ``FROM`` image not in ``present`` (and not an earlier stage or
    ``scratch``) replaced by ``base``; and the images replaced."""
    stages: set[str] = set()
    replaced: list[str] = []

    def swap(match: re.Match[str]) -> str:
        head, flags, image, rest = match.groups()
        words = rest.split()
        if len(words) == 2 and words[0].lower() == "as":
            stages.add(words[1].lower())
        if image.lower() in stages or image == "scratch" or image in present or "$" in image:
            return match.group(0)
        replaced.append(image)
        return f"{head}{flags}{base}{rest}"

    return _FROM.sub(swap, dockerfile), replaced


async def build_task_image(engine: Engine, context: Path, base: str | None = None) -> str:
    """The tag of a task's own image, built from ``context/Dockerfile`` when the engine lacks it;
    a ``FROM`` image the engine does not have is replaced by ``base`` (default
    :func:`base_image`).

    Raises:
        SandboxError: the folder or its Dockerfile is missing, or the build failed.
    """
    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file():
        raise SandboxError(f"the task's build context {context} has no Dockerfile")
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    base = base or base_image()
    named = {m.group(3) for m in _FROM.finditer(text)}
    async with engine.connect() as api:
        present = {image for image in named if await api.image(image) is not None}
    rewritten, replaced = local_from(text, present, base)
    if replaced:
        log.info("%s: FROM %s is not in the engine: built on %s", dockerfile, ", ".join(replaced), base)
    payload, key = await asyncio.to_thread(context_tar, dockerfile, context, rewritten.encode())
    return await _build(engine, payload, key, str(dockerfile))


async def _build(engine: Engine, payload: bytes, key: str, what: str) -> str:
    from envbuilder.isolation.sandbox._images import _check_progress

    tag = f"envbuilder-session:{key}"
    async with engine.connect() as api:
        if await api.image(tag) is not None:
            return tag
        response = await api.request(
            "POST",
            "/build",
            params={"t": tag, "rm": 1, "forcerm": 1, "networkmode": "none"},
            content=payload,
            headers={"Content-Type": "application/x-tar"},
            timeout=None,
        )
        assert response is not None
        _check_progress(response.text, f"building the sandbox image from {what}")
    return tag
