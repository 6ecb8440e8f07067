"""The files an environment is made of (spec, data, prompt template) and their content hash."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from envbuilder.environment import Environment
from envbuilder.templating import jinja_env

__all__ = ["content_hash", "environment_files", "file_sha256"]

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


def environment_files(env: Environment) -> dict[str, Path]:
    """Every file ``env`` is made of, by its path relative to the spec's folder (POSIX, may start
    with ``../``): the spec, the files its source reads, and its prompt template file.

    A template shipped with envbuilder is listed under the name the spec uses for it, so a pack
    that bundles it there serves exactly that template (the spec's folder is searched first).
    """
    base = env.loaded.base_dir.resolve()

    def name(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), base)).as_posix()

    out: dict[str, Path] = {}
    if env.loaded.path is not None:
        out[name(env.loaded.path)] = env.loaded.path.resolve()
    for path in env.source.files():
        out[name(path)] = path.resolve()
    template = env.spec.prompt.template_file
    if template is not None:
        jinja = jinja_env(env.loaded.base_dir)
        filename = jinja.loader.get_source(jinja, template)[1]  # type: ignore[union-attr]
        if filename is not None:
            found = Path(filename).resolve()
            out[name(found) if found.is_relative_to(base) else Path(template).as_posix()] = found
    return dict(sorted(out.items()))


def content_hash(digests: dict[str, str]) -> str:
    """``sha256:<hex>`` over ``<sha256>  <name>`` lines (``sha256sum`` format), sorted by name."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
