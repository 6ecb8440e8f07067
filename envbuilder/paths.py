"""Where envbuilder keeps files of its own: the cache folder (filters, row indexes, judge
replies, extracted packs)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$ENVBUILDER_CACHE_DIR``, else ``$XDG_CACHE_HOME/envbuilder``, else ``~/.cache/envbuilder``
    (not created here: each user makes the sub-folder it writes to)."""
    configured = os.environ.get("ENVBUILDER_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "envbuilder"
