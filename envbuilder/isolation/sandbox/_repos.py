"""A task's repository as a tar of its tree at the base commit (no ``.git``: no history at all).

The tree comes from a git repository or bundle under a folder the operator allows (the spec's
own folder, or one of ``$ENVBUILDER_REPOSITORIES``, separated by ``:``), through ``git archive``
on the host, or from a task field holding the tree as a tar. The container gets only the tree;
:mod:`._containers` makes it a fresh repository with one commit, so ``git log``, ``git show``,
remote refs and reflogs hold nothing from after the base commit.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envbuilder.errors import SandboxError
from envbuilder.spec import RepositorySpec

ROOTS_ENV = "ENVBUILDER_REPOSITORIES"
_COMMIT = re.compile(r"^[0-9A-Za-z._/-]{1,200}$")
_MAX_TREE = 512 * 1024 * 1024
_CACHE_ENTRIES = 16
_cache: OrderedDict[tuple[str, str], bytes] = OrderedDict()
_lock = threading.Lock()


def allowed_roots(base_dir: Path) -> list[Path]:
    """The folders repositories may come from: the spec's folder and ``$ENVBUILDER_REPOSITORIES``."""
    extra = [Path(p) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p]
    return [base_dir.resolve(), *(p.resolve() for p in extra)]


def repository_tree(spec: RepositorySpec, task: Mapping[str, Any], base_dir: Path) -> bytes:
    """The tar of the task's repository tree (blocking: call it on a thread).

    Raises:
        SandboxError: the field is missing, the repository is not allowed or not found, the
        commit is unknown, or the tarball cannot be read.
    """
    if spec.tarball_field is not None:
        return _from_tarball(task.get(spec.tarball_field), spec.tarball_field)
    assert spec.field is not None
    name, commit = task.get(spec.field), task.get(spec.commit_field)
    if not isinstance(name, str) or not name.strip():
        raise SandboxError(f"the task has no repository in its field `{spec.field}`")
    if not isinstance(commit, str) or not _COMMIT.match(commit) or commit.startswith("-"):
        raise SandboxError(f"the task's `{spec.commit_field}` is not a commit: {commit!r}")
    repo = locate(name, spec.mirrors, base_dir)
    key = (str(repo), commit)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    tree = _archive(_as_repository(repo), commit)
    with _lock:
        _cache[key] = tree
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return tree


def locate(name: str, mirrors: str | None, base_dir: Path) -> Path:
    """The repository called ``name``, under an allowed folder."""
    roots = allowed_roots(base_dir)
    folder = (base_dir / mirrors) if mirrors else base_dir
    candidates = []
    for stem in dict.fromkeys((name, name.replace("/", "__"))):
        for suffix in ("", ".git", ".bundle"):
            candidates.append(folder / f"{stem}{suffix}")
    for path in candidates:
        if path.exists():
            resolved = path.resolve()
            if not any(resolved.is_relative_to(root) for root in roots):
                raise SandboxError(
                    f"the repository {name!r} ({resolved}) is outside the folders repositories may come from",
                    hint=f"Put it under the spec's folder, or add its folder to ${ROOTS_ENV}",
                )
            return resolved
    raise SandboxError(
        f"no repository {name!r} in {folder}",
        hint="A git repository (or .git / .bundle) named after the task's repository field",
    )


def _git(*args: str, cwd: Path | None = None, extra_env: Mapping[str, str] | None = None) -> bytes:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": "/nonexistent",
        **(extra_env or {}),
    }
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, timeout=600, check=False)
    except FileNotFoundError:
        raise SandboxError("repository tasks need git on the server") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxError(f"git {args[0]} failed: {said[-1] if said else done.returncode}")
    return done.stdout


def _as_repository(path: Path) -> Path:
    """A git directory for ``path``; a bundle is cloned (bare) once into the cache."""
    if path.is_dir():
        return path
    from envbuilder.paths import cache_dir

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    target = cache_dir() / "repositories" / f"{path.stem}-{digest}.git"
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            staged = Path(tmp) / "repo.git"
            _git("clone", "-q", "--bare", str(path), str(staged))
            with _lock:
                if not target.is_dir():
                    shutil.move(str(staged), target)
    return target


def _archive(repo: Path, commit: str) -> bytes:
    _git("-C", str(repo), "rev-parse", "--verify", "-q", f"{commit}^{{commit}}")
    data = _git("-C", str(repo), "archive", "--format=tar", commit)
    if len(data) > _MAX_TREE:
        raise SandboxError(f"the repository's tree at {commit} is larger than 512 MiB")
    return data


def _from_tarball(value: Any, field: str) -> bytes:
    if isinstance(value, str):
        try:
            value = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise SandboxError(f"the task's `{field}` is neither tar bytes nor base64 text") from None
    if not isinstance(value, bytes | bytearray) or not value:
        raise SandboxError(f"the task has no repository tarball in its field `{field}`")
    data = bytes(value)
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(_MAX_TREE + 1)
        except (OSError, EOFError):
            raise SandboxError(f"the task's `{field}` is not a readable .tar.gz") from None
    if len(data) > _MAX_TREE:
        raise SandboxError(f"the task's `{field}` holds more than 512 MiB")
    return strip_git(data, field)


def strip_git(data: bytes, what: str) -> bytes:
    """``data`` (a tar) without ``.git`` and without links that leave the tree (checked here,
    before it reaches a container)."""
    out = io.BytesIO()
    try:
        with (
            tarfile.open(fileobj=io.BytesIO(data), mode="r:") as src,
            tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as dst,
        ):
            members = src.getmembers()
            top = _single_top([_clean(m.name) for m in members])
            for member in members:
                parts = _clean(member.name)
                if top is not None:
                    parts = parts[1:]
                if not parts or parts[0] == ".git" or ".." in parts or member.isdev():
                    continue
                if (member.issym() or member.islnk()) and (
                    member.linkname.startswith("/") or ".." in member.linkname.split("/")
                ):
                    continue
                member.name = "/".join(parts)
                member.uid = member.gid = 0
                member.uname = member.gname = ""
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    except tarfile.TarError as exc:
        raise SandboxError(f"the {what} is not a readable tar: {exc}") from None
    return out.getvalue()


def _clean(name: str) -> list[str]:
    return [p for p in name.split("/") if p not in ("", ".")]


def _single_top(names: list[list[str]]) -> str | None:
    """``project-1.0`` when every member lies in one top folder (an sdist, a GitHub tarball)."""
    tops = {parts[0] for parts in names if parts}
    if len(tops) != 1 or not any(len(parts) > 1 for parts in names):
        return None
    return tops.pop()


_committed: OrderedDict[tuple[str, int, str], bytes] = OrderedDict()
_BASE_DATE = "2000-01-01T00:00:00Z"


def committed_tree(tree: bytes, *, uid: int, prefix: str, last: Mapping[str, bytes] | None = None) -> bytes:
    """``tree`` as a fresh git repository with one commit (``base``), made on the host: a tar of
    its files and ``.git`` under ``prefix``, owned by ``uid``, then the files of ``last`` (root's,
    read-only) at the end. Cached by content (blocking: call it on a thread).

    Why on the host: ``git add`` of a repository's tree inside the container was most of a
    session container's set-up (seconds on a loaded engine, for every session); here it is done
    once per tree, and the container's set-up is one archive upload. The repository is the same
    as one made in the container: no history, remote or reflog from before the base commit."""
    extra = dict(last or {})
    digest = hashlib.sha256(tree)
    for path, data in sorted(extra.items()):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    key = (digest.hexdigest(), uid, prefix)
    with _lock:
        if key in _committed:
            _committed.move_to_end(key)
            return _committed[key]
    with tempfile.TemporaryDirectory(prefix="envbuilder-tree-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        with tarfile.open(fileobj=io.BytesIO(tree), mode="r:") as src:
            src.extractall(root, filter="data")
        env = {
            "GIT_AUTHOR_NAME": "envbuilder",
            "GIT_AUTHOR_EMAIL": "envbuilder@localhost",
            "GIT_AUTHOR_DATE": _BASE_DATE,
            "GIT_COMMITTER_NAME": "envbuilder",
            "GIT_COMMITTER_EMAIL": "envbuilder@localhost",
            "GIT_COMMITTER_DATE": _BASE_DATE,
        }
        _git("-c", "init.defaultBranch=master", "init", "-q", "--template=", str(root))
        _git("-C", str(root), "add", "-A")
        _git("-C", str(root), "commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", "base", extra_env=env)
        out = io.BytesIO()
        top = prefix.strip("/")

        def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = uid
            info.uname = info.gname = ""
            return info

        with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as dst:
            for child in sorted(root.iterdir()):
                dst.add(child, arcname=f"{top}/{child.name}" if top else child.name, filter=owned)
            for path, data in extra.items():
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size, info.mode = len(data), 0o644
                dst.addfile(info, io.BytesIO(data))
    result = out.getvalue()
    with _lock:
        _committed[key] = result
        while len(_committed) > _CACHE_ENTRIES:
            _committed.popitem(last=False)
    return result
