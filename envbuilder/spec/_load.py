"""Read a spec file, validate it, and locate every problem at file:line:col and key path."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envbuilder.errors import Problem, SpecError, did_you_mean
from envbuilder.spec._models import Spec
from envbuilder.spec._yaml import Positions, load_yaml

__all__ = ["LoadedSpec", "load_spec", "parse_spec"]


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec and where it came from (relative paths resolve against ``base_dir``)."""

    spec: Spec
    path: Path | None
    base_dir: Path
    positions: Positions

    def locate(
        self,
        loc: tuple[str | int, ...],
        message: str,
        *,
        code: str,
        value: Any = None,
        has_value: bool = False,
        hint: str | None = None,
    ) -> Problem:
        """A :class:`Problem` at ``loc`` in this spec's file."""
        line, col = self.positions.lookup(loc)
        return Problem(
            code=code,
            message=message,
            loc=loc,
            file=self.positions.file,
            line=line,
            col=col,
            value=value,
            has_value=has_value,
            hint=hint,
        )


def load_spec(path: str | os.PathLike[str]) -> LoadedSpec:
    """Load and validate the spec at ``path``; raises :class:`SpecError` listing every problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [
                Problem(
                    code="spec_unreadable",
                    message=f"cannot read spec: {exc.strerror}",
                    file=str(p),
                    hint="Check the path",
                )
            ]
        ) from None
    return parse_spec(text, file=str(p), base_dir=p.resolve().parent, path=p)


def parse_spec(
    text: str,
    *,
    file: str = "<spec>",
    base_dir: str | os.PathLike[str] | None = None,
    path: Path | None = None,
) -> LoadedSpec:
    """Validate spec ``text``; ``file`` is only used in error messages."""
    data, positions = load_yaml(text, file)
    if not isinstance(data, dict):
        raise SpecError(
            [
                Problem(
                    code="spec_not_mapping",
                    file=file,
                    line=1,
                    col=1,
                    message="a spec must be a YAML mapping of keys to values",
                    value=data,
                    has_value=True,
                    hint="Start with `name: my-env` on the first line",
                )
            ]
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError([_problem(err, positions, data) for err in exc.errors()]) from None
    return LoadedSpec(spec=spec, path=path, base_dir=Path(base_dir or Path.cwd()), positions=positions)


_TAGS = re.compile(r"'([^']*)'")


def _problem(err: Any, positions: Positions, data: Any) -> Problem:
    loc = _strip_tags(tuple(err["loc"]), data)
    kind = err["type"]
    hint = None
    message = err["msg"]
    value = err.get("input")
    has_value = kind not in ("missing",)
    ctx = err.get("ctx") or {}
    if kind == "union_tag_invalid":
        expected = _TAGS.findall(str(ctx.get("expected_tags", "")))
        tag = str(ctx.get("tag"))
        message = f"unknown type {tag!r}"
        hint = did_you_mean(tag, expected) or f"Known types: {', '.join(expected)}"
        loc = (*loc, "type")
        value, has_value = None, False
    elif kind == "union_tag_not_found":
        message = "a `type:` key is required here"
        has_value = False
    elif kind == "extra_forbidden":
        parent_loc = loc[:-1]
        message = f"unknown key {loc[-1]!r}"
        known = _known_keys(parent_loc, data)
        hint = did_you_mean(str(loc[-1]), known) if known else None
        has_value = False
    elif kind == "missing":
        message = f"missing required key {loc[-1]!r}" if loc else "missing required key"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
        has_value = False
    line, col = positions.lookup(loc, key=kind in ("extra_forbidden", "union_tag_invalid"))
    return Problem(
        code=kind,
        message=message,
        loc=loc,
        file=positions.file,
        line=line,
        col=col,
        value=value,
        has_value=has_value,
        hint=hint,
    )


def _strip_tags(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop the union tags pydantic puts in locations (`dataset.parquet.files` → `dataset.files`)."""
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and node.get("type") == part:
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _known_keys(loc: tuple[Any, ...], data: Any) -> list[str]:
    from envbuilder.spec._schema import keys_at

    return keys_at(loc, data)
