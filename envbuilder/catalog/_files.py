"""The content hash of an environment's files (``Environment.files``: what loading it read)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

__all__ = ["content_hash", "file_sha256"]

_digests: dict[tuple[str, int, int, int], str] = {}
_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, read in chunks; remembered while the file's size and mtime stay."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _lock:
        known = _digests.get(key)
    if known is not None:
        return known
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    with _lock:
        _digests[key] = digest
    return digest


def content_hash(digests: dict[str, str]) -> str:
    """``sha256:<hex>`` over ``<sha256>  <name>`` lines (``sha256sum`` format), sorted by name."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
