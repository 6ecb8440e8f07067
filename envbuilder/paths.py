"""Where envbuilder keeps files of its own (the cache folder: filters, row indexes, judge
replies, extracted packs), and which files a served spec may read.

``envbuilder serve`` runs specs it may not trust, so it sets ``$ENVBUILDER_CONTAIN_FILES``:
then a spec reads only files inside its own folder (after following symlinks), inside an
extracted pack, or inside the folders the operator allows (``--data-root``, kept in
``$ENVBUILDER_DATA_ROOTS``). Authoring commands (``validate``, ``check``, ``pack``) read what
their user points them at, e.g. data in a sibling folder that ``pack`` then bundles."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cache_dir", "check_inside", "contained", "data_roots"]


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
