"""Where envbuilder keeps files of its own (the cache folder: filters, row indexes, judge
replies, extracted packs), and which files a served spec may read.

``envbuilder serve`` runs specs it may not trust, so it sets ``$ENVBUILDER_CONTAIN_FILES``:
then a spec reads only files inside its own folder (after following symlinks), inside an
extracted pack, or inside the folders the operator allows (``--data-root``, kept in
``$ENVBUILDER_DATA_ROOTS``). Authoring commands (``validate``, ``check``, ``pack``) read what
their user points them at, e.g. data in a sibling folder that ``pack`` then bundles.

Files envbuilder writes into a folder it does not own (a downloaded runs folder, a site's
output folder) go through :func:`write_file` / :func:`new_file`: a regular file made here and
renamed into place, never written through a symbolic link in that folder."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from envbuilder.errors import EnvbuilderError

__all__ = [
    "PACK_LOCK_NAME",
    "cache_dir",
    "check_inside",
    "contained",
    "data_roots",
    "new_file",
    "refuse_link",
    "relative_url",
    "write_file",
]

#: The lock file at the root of every pack (and of every extracted pack): its hashes, name, version.
PACK_LOCK_NAME = "envbuilder.lock.json"


def cache_dir() -> Path:
    """``$ENVBUILDER_CACHE_DIR``, else ``$XDG_CACHE_HOME/envbuilder``, else ``~/.cache/envbuilder``
    (not created here: each user makes the sub-folder it writes to)."""
    configured = os.environ.get("ENVBUILDER_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "envbuilder"


def data_roots() -> list[Path]:
    """Folders every spec may read besides its own: ``$ENVBUILDER_DATA_ROOTS`` (``os.pathsep``
    separated; ``envbuilder serve --data-root`` sets it)."""
    configured = os.environ.get("ENVBUILDER_DATA_ROOTS", "")
    return [Path(p).expanduser().resolve() for p in configured.split(os.pathsep) if p.strip()]


def check_inside(path: Path, base_dir: Path) -> Path | None:
    """``path`` resolved (symlinks followed) when it may be read: containment is off, or it lies
    inside ``base_dir``, a data root or the packs cache; else None (``../``, absolute paths and
    links out of the folder are refused)."""
    target = path.resolve()
    if not os.environ.get("ENVBUILDER_CONTAIN_FILES"):
        return target
    for root in (base_dir.resolve(), *data_roots()):
        if target.is_relative_to(root):
            return target
    return None


@contextlib.contextmanager
def contained(roots: list[Path]) -> Iterator[None]:
    """Within the block, specs read files only inside their folder or ``roots`` (the
    environment variables are restored afterwards)."""
    saved = {k: os.environ.get(k) for k in ("ENVBUILDER_CONTAIN_FILES", "ENVBUILDER_DATA_ROOTS")}
    extra = [str(p.expanduser().resolve()) for p in roots]
    os.environ["ENVBUILDER_DATA_ROOTS"] = os.pathsep.join(
        [*extra, *filter(None, [saved["ENVBUILDER_DATA_ROOTS"]])]
    )
    os.environ["ENVBUILDER_CONTAIN_FILES"] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _refused(path: Path, why: str) -> EnvbuilderError:
    return EnvbuilderError(
        f"refusing to write {path}: {why}",
        hint="Remove it, or write somewhere else (--out); envbuilder never writes through a link",
        code="unsafe_output",
    )


def _open_folder(path: Path, inside: Path) -> int:
    """A descriptor of ``path``'s folder, reached from ``inside`` one folder at a time without
    following a link (missing folders are made); ``inside`` itself is taken as named."""
    path, inside = Path(os.path.abspath(path)), Path(os.path.abspath(inside))
    try:
        parts = path.parent.relative_to(inside).parts
    except ValueError:
        raise _refused(path, f"it is not inside {inside}") from None
    inside.mkdir(parents=True, exist_ok=True)
    fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            shown = inside.joinpath(*parts[: i + 1])
            with _naming(shown):  # not the bare folder name the calls below are given
                try:
                    child = _open_child(part, fd, path, shown)
                except FileNotFoundError:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                    child = _open_child(part, fd, path, shown)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(part: str, fd: int, path: Path, shown: Path) -> int:
    """The folder ``part`` of the folder ``fd``, refused when it is a link or not a folder."""
    try:
        return os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(path, f"{shown} is a link or not a folder") from None
        raise


@contextlib.contextmanager
def new_file(path: Path, *, inside: Path | None = None, binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` as a new regular file: the block writes to a temporary file made (``O_EXCL``)
    in the same folder, renamed over ``path`` when the block succeeds. The folders from
    ``inside`` (default: ``path``'s own folder, as named) down to the file are entered without
    following links, and an existing link or non-regular file at ``path`` is refused, so nothing
    the folder's author placed there (``run.html -> ~/.bashrc``) is written through.

    Raises:
        EnvbuilderError: ``unsafe_output``, naming the link or the odd file.
    """
    inside = inside if inside is not None else path.parent
    folder = _open_folder(path, inside)
    try:
        with contextlib.suppress(FileNotFoundError):
            _check_regular(path, os.stat(path.name, dir_fd=folder, follow_symlinks=False))
        tmp = f".{path.name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        with _naming(path):
            fd = os.open(tmp, flags, 0o666, dir_fd=folder)
        try:
            with open(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
                yield f
            with _naming(path):
                os.rename(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OSError of the block names ``path``, not the temporary file (a name the user never gave)."""
    try:
        yield
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc


def refuse_link(path: Path) -> None:
    """Refuse to go on with ``path`` (a file about to be appended to or cut) when it is a
    symbolic link or not a regular file.

    Raises:
        EnvbuilderError: ``unsafe_output``.
    """
    try:
        _check_regular(path, path.lstat())
    except FileNotFoundError:
        return


def _check_regular(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _refused(path, "it is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise _refused(path, "it exists and is not a regular file")


def relative_url(path: str) -> str:
    """The relative POSIX ``path`` (a run's page, a pack in a catalog) as a link from a page:
    every segment percent-encoded and empty ones dropped, so a folder named ``javascript:x`` or
    ``a b#c`` stays a path below the page, never a scheme, a fragment or another host."""
    return "/".join(urllib.parse.quote(part, safe="") for part in path.split("/") if part not in ("", "."))


def write_file(path: Path, data: str | bytes, *, inside: Path | None = None) -> Path:
    """Write ``data`` to ``path`` through :func:`new_file`; returns ``path``."""
    with new_file(path, inside=inside, binary=isinstance(data, bytes)) as f:
        f.write(data)
    return path
