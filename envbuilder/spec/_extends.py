"""Spec inheritance: ``extends: base.yaml`` merges a base spec under the extending one.

The extending spec's keys override the base's; mappings merge key by key at every depth, and
any other value (a list, a string, ``null``) replaces the base's value whole. The positions of
the merged data remember which file each key came from, so a problem is reported at the line
of the file that holds the bad key.

A base's relative paths mean what they mean beside the base: before merging, its data paths
(``files``, ``data_files``) are rewritten relative to the extending spec's folder, and so is a
local dataset ``path`` when the folder is there (else it names a hub dataset); template files
are looked for in the spec's folder, then its bases' (``templating.template_folders``).

When a served spec's files are contained (``envbuilder serve``), a base outside the allowed
folders is refused before it is read, so no error can show a line of a file outside them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envbuilder.errors import Loc, Problem, SpecError
from envbuilder.paths import check_inside
from envbuilder.spec._yaml import Positions, load_yaml

__all__ = ["resolve_extends"]


def resolve_extends(
    data: Any, positions: Positions, base_dir: Path, chain: tuple[Path, ...] = (), root: Path | None = None
) -> tuple[Any, Positions]:
    """``data`` with its ``extends:`` chain merged in (unchanged when it has none).

    ``chain`` holds the resolved paths of the specs already being loaded, to detect cycles;
    ``base_dir`` is the folder ``extends:`` paths are relative to; ``root`` the folder of the
    spec being loaded (its files must stay inside it, or a data root, when contained).
    """
    root = root if root is not None else base_dir
    if not isinstance(data, dict) or "extends" not in data:
        return data, positions
    path, base, base_positions = _read_base(data["extends"], positions, base_dir, chain, root)
    base, base_positions = resolve_extends(base, base_positions, path.parent, (*chain, path), root)
    if path.parent != base_dir.resolve():
        base = _rebased(base, path.parent, base_dir.resolve())
    merged, merged_positions = _merge(base, base_positions, data, positions)
    merged_positions.bases = [path, *base_positions.bases]
    return merged, merged_positions


def _read_base(
    ref: Any, positions: Positions, base_dir: Path, chain: tuple[Path, ...], root: Path
) -> tuple[Path, dict[str, Any], Positions]:
    """The base spec ``extends: ref`` names: its resolved path, data and positions; a located
    SpecError when the reference is not a path, makes a cycle, lies outside ``root`` (when
    contained), cannot be read or is not a mapping."""

    def problem(message: str, hint: str, code: str, **value: Any) -> SpecError:
        file, line, col = positions.where(("extends",))
        located = Problem(
            code=code, message=message, loc=("extends",), file=file, line=line, col=col, hint=hint, **value
        )
        return SpecError([located])

    if not isinstance(ref, str) or not ref.strip():
        raise problem(
            "expected the path of the spec this one extends",
            "Write e.g. `extends: base.yaml` (relative to this file)",
            "extends_invalid",
            value=ref,
            has_value=True,
        )
    path = (base_dir / ref).resolve()
    shown = os.path.normpath(os.path.join(os.path.dirname(positions.file), ref))
    if path in chain:
        names = [_shown(p) for p in (*chain, path)]
        raise problem(
            f"`extends` makes a cycle: {' → '.join(names)}",
            "A spec cannot extend itself, directly or through other specs",
            "extends_cycle",
        )
    if check_inside(path, root) is None:  # checked before reading: no error shows its lines
        raise problem(
            f"the base spec {shown!r} is outside the spec's folder",
            "Keep a base beside the specs that extend it (or in a folder the operator allows: --data-root)",
            "extends_outside",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise problem(
            f"cannot read the base spec {shown!r}: {exc.strerror}",
            "`extends` paths are relative to the spec that holds them",
            "extends_unreadable",
        ) from None
    base, base_positions = load_yaml(text, shown)
    if not isinstance(base, dict):
        raise problem(
            f"the base spec {shown!r} is not a mapping of keys to values",
            "A base spec is a spec file (it may leave out keys the extending spec sets)",
            "extends_invalid",
        )
    return path, base, base_positions


#: Keys whose relative values are data paths (a file, a glob, a folder; or lists and maps of them).
_DATA_KEYS = frozenset({"files", "data_files"})
#: Keys whose value is a path only when it exists beside the base (else a hub dataset id, or
#: a file the spec names that is not there: reported where it is read).
_FILE_KEYS = frozenset({"path", "file"})


def _rebased(value: Any, source: Path, target: Path, key: str | None = None) -> Any:
    """``value`` (a base spec's data) with its relative paths made relative to ``target``."""

    def move(path: str, always: bool) -> str:
        if "://" in path or os.path.isabs(path) or not (always or (source / path).exists()):
            return path
        return Path(os.path.relpath(source / path, target)).as_posix()

    if isinstance(value, dict):
        return {k: _rebased(v, source, target, k if key not in _DATA_KEYS else key) for k, v in value.items()}
    if isinstance(value, list):
        return [_rebased(v, source, target, key) for v in value]
    if isinstance(value, str) and key in _DATA_KEYS | _FILE_KEYS:
        return move(value, always=key in _DATA_KEYS)
    return value


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _merge(
    base: dict[str, Any], base_pos: Positions, child: dict[str, Any], child_pos: Positions
) -> tuple[dict[str, Any], Positions]:
    replaced: set[Loc] = set()

    def merge(b: dict[Any, Any], c: dict[Any, Any], loc: Loc) -> dict[Any, Any]:
        out = dict(b)
        for key, value in c.items():
            here: Loc = (*loc, key)
            if isinstance(value, dict) and isinstance(b.get(key), dict):
                out[key] = merge(b[key], value, here)
            else:
                out[key] = value
                replaced.add(here)
        return out

    data = merge(base, child, ())

    def kept(loc: Loc) -> bool:
        return not any(loc[:n] in replaced for n in range(1, len(loc) + 1))

    pos = Positions(child_pos.file)
    for source, marks, into in (
        (base_pos, base_pos.marks, pos.marks),
        (base_pos, base_pos.key_marks, pos.key_marks),
    ):
        for loc, mark in marks.items():
            if kept(loc):
                into[loc] = mark
                pos.files[loc] = source.files.get(loc, source.file)
    for loc, mark in child_pos.marks.items():
        pos.marks[loc] = mark
        pos.files[loc] = child_pos.files.get(loc, child_pos.file)
    for loc, mark in child_pos.key_marks.items():
        pos.key_marks[loc] = mark
        pos.files[loc] = child_pos.files.get(loc, child_pos.file)
    for loc in [loc for loc, file in pos.files.items() if file == pos.file]:
        del pos.files[loc]
    return data, pos
