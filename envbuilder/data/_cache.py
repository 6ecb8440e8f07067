"""The on-disk cache of derived data (row indexes, filter results), keyed by the data's identity.

Entries live under ``$ENVBUILDER_CACHE_DIR`` (default ``~/.cache/envbuilder``). Each key is a hash
of the identity of every data file it derives from (absolute path, size and mtime in ns), a
format version, and whatever else decides the content (a filter's expression, …).

Invalidation: changing a data file changes its size or mtime, editing a filter changes the
expression, and a new envbuilder format changes the version; each gives a new key, so a stale
entry is never read. Stale entries are left behind and may be deleted at any time
(``rm -rf ~/.cache/envbuilder``). Entries are written under a temporary name and renamed into
place, so no reader, in this or another process, ever sees half an entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from envbuilder.paths import cache_dir

FORMAT_VERSION = 1


def file_identity(paths: Iterable[Path]) -> list[tuple[str, int, int]]:
    """(absolute path, size, mtime in ns) of each file: what a cache key derives from."""
    out = []
    for path in paths:
        st = os.stat(path)
        out.append((str(Path(path).resolve()), st.st_size, st.st_mtime_ns))
    return out


def cache_key(*parts: object) -> str:
    """A short stable hash of JSON-serialisable ``parts`` (plus the format version)."""
    text = json.dumps([FORMAT_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def cache_path(kind: str, key: str, suffix: str) -> Path:
    """Where the entry ``key`` of ``kind`` (``rows``, ``filters``) lives."""
    return cache_dir() / kind / f"{key}{suffix}"


@contextmanager
def atomic_write(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place when the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Hold the host-wide lock for building the entry ``path``. The worker processes of one
    host share this cache, so the first to need an entry builds it while the others wait here
    and then read it: each entry is built once per host, not once per worker. (An advisory
    ``flock`` on a file in ``locks/``, released by the kernel if its holder dies.) The entry's
    folder is made first, so the holder can write the entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no lock; each process may build the entry itself
        yield
        return
    locks = cache_dir() / "locks"  # apart from the entries, which readers list
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.blake2b(str(path).encode(), digest_size=16).hexdigest()
    with open(locks / f"{name}.lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove_abandoned(path: Path) -> None:
    """Delete temporary files of ``path`` left by processes that died while writing them."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        except (ValueError, PermissionError, OSError):
            continue  # not ours to judge: another user's process, or an unexpected name
