"""Where envbuilder keeps files of its own (the cache folder: filters, row indexes, judge
replies, extracted packs), and which files a spec may read (its own folder, plus the folders
an operator allows with ``--data-root`` / ``$ENVBUILDER_DATA_ROOTS``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "check_inside", "data_roots"]


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
    """``path`` resolved (symlinks followed) when it lies inside ``base_dir`` or a data root,
    else None: a spec is not trusted to name files elsewhere (``../``, absolute paths, links)."""
    target = path.resolve()
    for root in (base_dir.resolve(), *data_roots()):
        if target.is_relative_to(root):
            return target
    return None
