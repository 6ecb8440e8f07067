"""Load as much of an invalid spec as is valid, so later checks can still run on those parts.

``envbuilder validate`` reports every problem at once: a spec whose ``prompt:`` block is
invalid should still have its dataset opened and its grader's columns checked. The blocks
that failed validation take their defaults or, when required, become :class:`Unchecked`
placeholders; any code reading one gets an :class:`UncheckedError` (an ``EnvbuilderError``),
which Environment's checks already collect as problems and the caller drops. So every check
written for valid specs runs on the valid parts of an invalid one, without knowing them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError, create_model

from envbuilder.errors import EnvbuilderError, Problem, SpecError
from envbuilder.spec._load import LoadedSpec, read_spec_data, read_spec_text
from envbuilder.spec._messages import spec_problems
from envbuilder.spec._models import Spec

__all__ = ["Unchecked", "UncheckedError", "load_spec_partially"]


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


def load_spec_partially(path: str | os.PathLike[str]) -> tuple[LoadedSpec | None, list[Problem]]:
    """The spec at ``path`` and its schema problems.

    Valid: ``(loaded, [])``. Invalid: the problems, with a spec whose invalid top-level blocks
    are :class:`Unchecked` (or None when nothing usable could be built, e.g. broken YAML).
    """
    p = Path(path)
    base_dir = p.resolve().parent
    try:
        data, positions = read_spec_data(read_spec_text(p), file=str(p), base_dir=base_dir, path=p)
    except SpecError as exc:
        return None, exc.problems
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        problems = spec_problems(exc, positions, data)
        partial = _partial(data, exc)
        if partial is None:
            return None, problems
        return LoadedSpec(spec=partial, path=p, base_dir=base_dir, positions=positions), problems
    return LoadedSpec(spec=spec, path=p, base_dir=base_dir, positions=positions), []


def _partial(data: dict[str, Any], exc: ValidationError) -> Spec | None:
    bad = {err["loc"][0] for err in exc.errors() if err["loc"]}
    if any(not err["loc"] for err in exc.errors()):
        return None  # a whole-spec rule failed: no block can be trusted on its own
    # An invalid block with a default takes its default; a required one becomes Unchecked.
    fields = {k for k in bad if k in Spec.model_fields and Spec.model_fields[k].is_required()}
    model = create_model(  # type: ignore[call-overload]
        "PartialSpec", __base__=Spec, **{k: (Any, None) for k in fields}
    )
    try:
        spec: Spec = model.model_validate({k: v for k, v in data.items() if k not in bad})
    except Exception:  # a cross-key rule that needs an invalid block: give up on partial checks
        return None
    for key in fields:
        object.__setattr__(spec, key, Unchecked(key))
    return spec
