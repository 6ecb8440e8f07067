"""The tree a repository task's tests run on, built on the server from parts it trusts.

Nothing of the agent's container is run or trusted: its working folder arrives as a tar of
plain files (``.git`` ignored: a repository's hooks and config are code), and only what differs
from the base tree is taken, except *protected* paths (the tests, ``conftest.py``, the test
runner's configuration, ``sitecustomize``, ``.pth`` files, and every file the hidden test patch
touches), which keep their base content whatever the agent did. Then the submitted patch (when
the answer holds one) goes on, the protected paths are restored again, and the hidden test patch
is applied last. The result is a tar for a fresh container (see
:meth:`envbuilder.isolation.sandbox.SessionContainers.run_fresh`).
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envbuilder.errors import GraderError

#: Paths an agent's changes never reach the tests through (besides the test patch's own files).
PROTECTED = (
    "conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "pytest.py",
    "_pytest/*",
    "pluggy/*",
    "test_*.py",
    "*_test.py",
    "tests/*",
    "test/*",
    "testing/*",
)
_MAX_FILES = 200_000
_MAX_BYTES = 512 * 1024 * 1024
_DIFF_PATH = re.compile(r"^(?:---|\+\+\+) (?:a/|b/)?(.+?)\s*$", re.M)

Entry = tuple[str, bytes, int]
"""A tree's entry: ``("f", content, mode)`` or ``("l", link target, 0)``."""
Tree = dict[str, Entry]


class PatchFailed(GraderError):
    """A patch does not apply to the tree."""


@dataclass
class Built:
    """The tree for the tests, and what became of the agent's changes."""

    tar: bytes
    changed: list[str] = field(default_factory=list)
    """Paths the agent changed, added or removed that the tests see."""
    reverted: list[str] = field(default_factory=list)
    """Protected paths the agent changed, kept at their base content."""


def patch_paths(patch: str) -> set[str]:
    """The paths a unified diff touches (``a/`` and ``b/`` sides, ``/dev/null`` left out)."""
    return {m.group(1) for m in _DIFF_PATH.finditer(patch) if m.group(1) != "/dev/null"}


def is_protected(path: str, patterns: tuple[str, ...] | list[str], extra: set[str]) -> bool:
    if path in extra:
        return True
    name = path.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(path, pattern) or ("/" not in pattern and fnmatch.fnmatchcase(name, pattern))
        or fnmatch.fnmatchcase(path, "*/" + pattern)
        for pattern in patterns
    )  # fmt: skip


def read_tar(data: bytes, what: str) -> Tree:
    """The files and symlinks of a tar (folders implied; ``.git``, devices and links that
    leave the tree dropped)."""
    tree: Tree = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if not parts or parts[0] == ".git" or ".." in parts:
                    continue
                path = "/".join(parts)
                if member.isfile():
                    handle = tar.extractfile(member)
                    content = handle.read() if handle is not None else b""
                    total += len(content)
                    tree[path] = ("f", content, 0o755 if member.mode & 0o111 else 0o644)
                elif member.issym():
                    target = member.linkname
                    if not target.startswith("/") and ".." not in target.split("/"):
                        tree[path] = ("l", target.encode(), 0)
                if len(tree) > _MAX_FILES or total > _MAX_BYTES:
                    raise GraderError(f"the {what} holds more than {_MAX_FILES:,} files or 512 MiB")
    except tarfile.TarError as exc:
        raise GraderError(f"the {what} is not a readable tar: {exc}") from None
    return tree


def to_tar(tree: Tree) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(tree):
            kind, data, mode = tree[path]
            info = tarfile.TarInfo(path)
            if kind == "l":
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _write_dir(tree: Tree, root: Path) -> None:
    for path, (kind, data, mode) in tree.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "l":
            os.symlink(data.decode(), target)
        else:
            target.write_bytes(data)
            target.chmod(mode)


def _read_dir(root: Path) -> Tree:
    tree: Tree = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            full = Path(dirpath) / name
            path = full.relative_to(root).as_posix()
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                tree[path] = ("l", os.readlink(full).encode(), 0)
            elif stat.S_ISREG(info.st_mode):
                tree[path] = ("f", full.read_bytes(), 0o755 if info.st_mode & 0o111 else 0o644)
    return tree


def apply_patch(tree: Tree, patch: str, what: str) -> Tree:
    """``tree`` with the unified diff ``patch`` applied (``git apply``, which refuses paths
    outside the tree).

    Raises:
        PatchFailed: the patch does not apply (git's words in the message).
    """
    if not patch.strip():
        return tree
    with tempfile.TemporaryDirectory(prefix="envbuilder-tree-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        _write_dir(tree, root)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CEILING_DIRECTORIES": tmp,
        }
        done = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "--recount", "-"],
            cwd=root,
            input=patch.encode() + (b"" if patch.endswith("\n") else b"\n"),
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise PatchFailed(f"the {what} does not apply: {'; '.join(said[:3]) or done.returncode}")
        return _read_dir(root)


def build_tree(
    base: bytes,
    agent: bytes | None,
    answer_patch: str,
    test_patch: str,
    protected: tuple[str, ...] | list[str] = PROTECTED,
    files: Mapping[str, bytes] | None = None,
) -> Built:
    """The tree the tests run on (blocking: call it on a thread).

    Raises:
        PatchFailed: the answer's patch does not apply (the agent's fault), or the test patch
            does not apply to the protected base files (the task's: callers make that void).
        GraderError: a tar cannot be read, or is too large.
    """
    base_tree = read_tar(base, "repository's tree")
    extra = patch_paths(test_patch)
    tree = dict(base_tree)
    reverted: set[str] = set()
    if agent is not None:
        mine = read_tar(agent, "session's working folder")
        for path in set(mine) | set(base_tree):
            if mine.get(path) == base_tree.get(path):
                continue
            if is_protected(path, protected, extra):
                reverted.add(path)
                continue
            if path in mine:
                tree[path] = mine[path]
            else:
                tree.pop(path, None)
    tree = apply_patch(tree, answer_patch, "answer's patch")
    changed: list[str] = []
    for path in sorted(set(tree) | set(base_tree)):
        if tree.get(path) == base_tree.get(path):
            continue
        if is_protected(path, protected, extra):
            reverted.add(path)
            if path in base_tree:
                tree[path] = base_tree[path]
            else:
                tree.pop(path)
        else:
            changed.append(path)
    try:
        tree = apply_patch(tree, test_patch, "task's test patch")
    except PatchFailed as exc:
        raise PatchFailed(exc.message, code="test_patch") from None
    for path, data in (files or {}).items():  # the grader's own (mode 0600), in the same archive
        tree[path] = ("f", data, 0o600)
    return Built(to_tar(tree), changed, sorted(reverted))
