"""Load as much of an invalid spec as is valid, so later checks can still run on those parts.

``envbuilder validate`` reports every problem at once: a spec whose ``prompt:`` block is
invalid should still have its dataset opened and its grader's columns checked. Each key that
failed validation is left out (so it takes its default: a split without its bad `slice:` is
still opened), a misspelled key is read under the name it was meant to have, and a required
top-level block that is invalid becomes an :class:`Unchecked` placeholder; any code reading
one gets an :class:`UncheckedError` (an ``EnvbuilderError``), which Environment's checks
already collect as problems and the caller drops. So every check written for valid specs runs
on the valid parts of an invalid one, without knowing them; the keys left out are listed, so
the caller can say which checks were skipped.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError, create_model

from envbuilder.errors import EnvbuilderError, Loc, Problem, SpecError
from envbuilder.spec._load import LoadedSpec, read_spec_data, read_spec_text
from envbuilder.spec._messages import misspelled_keys, spec_problems
from envbuilder.spec._models import Spec
from envbuilder.spec._yaml import Positions, read_yaml

__all__ = ["PartialLoad", "Unchecked", "UncheckedError", "load_spec_partially"]


class UncheckedError(EnvbuilderError):
    """Raised when code reads a spec block that failed validation (already reported)."""

    code = "unchecked"


class Unchecked:
    """Stands in for a top-level spec block that failed validation."""

    def __init__(self, key: str):
        self._key = key

    def __getattr__(self, name: str) -> Any:
        raise UncheckedError(f"`{self._key}` is invalid (reported above)")

    def __repr__(self) -> str:
        return f"Unchecked({self._key!r})"


@dataclass
class PartialLoad:
    """What :func:`load_spec_partially` could make of a spec file."""

    loaded: LoadedSpec | None
    """The spec with its invalid parts left out (None when nothing usable could be built)."""
    problems: list[Problem]
    """The schema problems, located."""
    skipped: list[Loc] = field(default_factory=list)
    """The keys left out of ``loaded`` because they are invalid: checks that need them are skipped."""


def load_spec_partially(path: str | os.PathLike[str]) -> PartialLoad:
    """The spec at ``path`` and its schema problems.

    Valid: the spec and no problems. Invalid: the problems, and a spec built from the rest: each
    invalid key is left out (a misspelled one is read under the name it was meant to have), and
    a required top-level block that is invalid becomes :class:`Unchecked`.
    """
    p = Path(path)
    base_dir = p.resolve().parent
    read: list[Problem] = []  # a duplicate key: reported with the rest, its first value checked
    try:
        text = read_spec_text(p)
    except SpecError as exc:
        return PartialLoad(None, exc.problems)
    try:
        data, positions = read_spec_data(text, file=str(p), base_dir=base_dir, path=p, problems=read)
    except SpecError as exc:  # (a base that cannot be read does not hide the spec's own mistakes)
        return PartialLoad(None, [*read, *exc.problems, *_own_problems(text, str(p))])
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        problems = [*read, *spec_problems(exc, positions, data)]
        usable = _usable(copy.deepcopy(data), positions, exc)
        if usable is None:
            return PartialLoad(None, problems)
        partial, skipped = usable
        return PartialLoad(
            LoadedSpec(spec=partial, path=p, base_dir=base_dir, positions=positions), problems, skipped
        )
    return PartialLoad(LoadedSpec(spec=spec, path=p, base_dir=base_dir, positions=positions), read)


def _usable(
    data: dict[str, Any], positions: Positions, exc: ValidationError
) -> tuple[Spec, list[Loc]] | None:
    """A spec from ``data`` without its invalid keys, and those keys; None when a whole-spec
    rule failed (no block can be trusted on its own)."""
    _read_misspelled(data, positions, spec_problems(exc, positions, data, keep_missing=True))
    skipped: list[Loc] = []
    unchecked: set[str] = set()
    for _ in range(8):  # each round leaves out what failed; a few rounds settle any spec
        model = create_model(  # type: ignore[call-overload]
            "PartialSpec", __base__=Spec, **{k: (Any, None) for k in unchecked}
        )
        try:
            spec: Spec = model.model_validate(data)
        except ValidationError as again:
            errors = again.errors()
            if any(not err["loc"] for err in errors):
                return None
            # Every error located before any key is left out: leaving out one error's key must not
            # shorten the next error's location (two errors in `grader.extract` would otherwise
            # leave out the whole grader, and its target would go unchecked).
            located = [(err, _existing(data, tuple(err["loc"]))) for err in errors]
            for err, loc in located:
                while loc and isinstance(loc[-1], int):
                    loc = loc[:-1]  # a bad list entry: the whole list, so later entries keep their index
                if not loc:
                    unchecked.add(str(err["loc"][0]))  # a required top-level block is missing
                    continue
                parent = _at(data, loc[:-1])
                if isinstance(parent, dict):
                    parent.pop(loc[-1], None)
                if loc not in skipped:
                    skipped.append(loc)
                top = Spec.model_fields.get(str(loc[0]))
                if len(loc) == 1 and top is not None and top.is_required():
                    unchecked.add(str(loc[0]))
            continue
        for key in unchecked:
            object.__setattr__(spec, key, Unchecked(key))
        outermost = {loc for loc in skipped if not any(loc[:n] in skipped for n in range(1, len(loc)))}
        return spec, sorted(outermost, key=lambda loc: [str(part) for part in loc])
    return None


#: Problems a base spec may settle: a required key, or a block's `type:`, it may supply.
_FROM_BASE = frozenset({"missing", "union_tag_not_found"})


def _own_problems(text: str, file: str) -> list[Problem]:
    """The problems of a spec's own keys when its ``extends:`` base cannot be read: those no
    base could settle (an unknown key, a bad value), not the keys the base may supply."""
    try:
        data, positions, _ = read_yaml(text, file)  # (its own read problems are reported already)
    except SpecError:
        return []
    if not isinstance(data, dict) or "extends" not in data:
        return []
    data.pop("extends")
    try:
        Spec.model_validate(data)
    except ValidationError as exc:
        return [p for p in spec_problems(exc, positions, data) if p.loc and p.code not in _FROM_BASE]
    return []


def _read_misspelled(data: dict[str, Any], positions: Positions, problems: list[Problem]) -> None:
    """Read each misspelled key's value under the key it was meant to be (and locate it there)."""
    for typo, meant in misspelled_keys(problems).items():
        parent = _at(data, typo[:-1])
        if isinstance(parent, dict) and typo[-1] in parent and meant[-1] not in parent:
            parent[meant[-1]] = parent.pop(typo[-1])
            for marks in (positions.marks, positions.key_marks):
                for loc, mark in list(marks.items()):
                    if loc[: len(typo)] == typo:
                        marks.setdefault((*meant, *loc[len(typo) :]), mark)


def _at(data: Any, loc: Loc) -> Any:
    node = data
    for part in loc:
        if _has(node, part):
            node = node[part]
        else:
            return None
    return node


def _existing(data: Any, loc: tuple[Any, ...]) -> Loc:
    """The longest prefix of pydantic's ``loc`` that names a value in ``data`` (union tags,
    which pydantic puts in locations, are skipped)."""
    out: list[Any] = []
    node = data
    for part in loc:
        if _has(node, part):
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part not in node and _is_tag(node, part):
            continue
        else:
            break
        out.append(part)
    return tuple(out)


def _is_tag(node: dict[str, Any], part: str) -> bool:
    """A union member's tag in a pydantic location (``literal['a']``, ``str``, a `type:` value)."""
    return node.get("type") == part or "[" in part or part in ("str", "int", "float", "bool", "list", "dict")


def _has(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
