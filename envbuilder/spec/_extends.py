"""Spec inheritance: ``extends: base.yaml`` merges a base spec under the extending one.

The extending spec's keys override the base's; mappings merge key by key at every depth, and
any other value (a list, a string, ``null``) replaces the base's value whole. The positions of
the merged data remember which file each key came from, so a problem is reported at the line
of the file that holds the bad key. Relative paths (data files, templates) are not rewritten:
they resolve against the folder of the spec being loaded, so keep a base beside its variants.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envbuilder.errors import Loc, Problem, SpecError
from envbuilder.spec._yaml import Positions, load_yaml

__all__ = ["resolve_extends"]


def resolve_extends(
    data: Any, positions: Positions, base_dir: Path, chain: tuple[Path, ...] = ()
) -> tuple[Any, Positions]:
    """``data`` with its ``extends:`` chain merged in (unchanged when it has none).

    ``chain`` holds the resolved paths of the specs already being loaded, to detect cycles;
    ``base_dir`` is the folder ``extends:`` paths are relative to.
    """
    if not isinstance(data, dict) or "extends" not in data:
        return data, positions
    ref = data["extends"]

    def problem(message: str, hint: str, code: str, **value: Any) -> SpecError:
        file, line, col = positions.where(("extends",))
        return SpecError(
            [
                Problem(
                    code=code,
                    message=message,
                    loc=("extends",),
                    file=file,
                    line=line,
                    col=col,
                    hint=hint,
                    **value,
                )
            ]
        )

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
    base, base_positions = resolve_extends(base, base_positions, path.parent, (*chain, path))
    merged, merged_positions = _merge(base, base_positions, data, positions)
    merged_positions.bases = [path, *base_positions.bases]
    return merged, merged_positions


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
