"""Read a spec file, validate it, and locate every problem at file:line:col and key path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envbuilder.errors import Loc, Problem, SpecError
from envbuilder.spec._extends import resolve_extends
from envbuilder.spec._messages import spec_problems
from envbuilder.spec._models import Spec
from envbuilder.spec._yaml import Positions, read_yaml

__all__ = ["LoadedSpec", "load_spec", "parse_spec", "read_spec_data"]


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec and where it came from (relative paths resolve against ``base_dir``)."""

    spec: Spec
    path: Path | None
    base_dir: Path
    positions: Positions

    def locate(
        self,
        loc: Loc,
        message: str,
        *,
        code: str,
        value: Any = None,
        has_value: bool = False,
        hint: str | None = None,
    ) -> Problem:
        """A :class:`Problem` at ``loc`` in this spec's file."""
        return self.positions.problem(loc, message, code=code, value=value, has_value=has_value, hint=hint)

    @property
    def files(self) -> list[Path]:
        """The spec files read to load it: its own file, then the bases it ``extends:``."""
        own = [self.path.resolve()] if self.path is not None else []
        return [*own, *self.positions.bases]


def load_spec(path: str | os.PathLike[str]) -> LoadedSpec:
    """Load and validate the spec at ``path``; raises :class:`SpecError` listing every problem."""
    p = Path(path)
    return parse_spec(read_spec_text(p), file=str(p), base_dir=p.resolve().parent, path=p)


def read_spec_text(path: Path) -> str:
    """The text of the spec file at ``path``; raises a located :class:`SpecError` when unreadable."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [
                Problem(
                    code="spec_unreadable",
                    message=f"cannot read spec: {exc.strerror}",
                    file=str(path),
                    hint="Check the path",
                )
            ]
        ) from None
    except UnicodeDecodeError as exc:  # a binary file: a pack, an image, a zip under another name
        raise SpecError(
            [
                Problem(
                    code="spec_unreadable",
                    message=f"a spec is UTF-8 text (YAML), and byte {exc.start} of this file is not "
                    f"UTF-8 ({exc.object[exc.start : exc.start + 1]!r})",
                    file=str(path),
                    hint="Give the spec's .yaml file; `serve`, `validate`, `check`, `catalog` and `eval` "
                    "also take packs (.zip)",
                )
            ]
        ) from None


def parse_spec(
    text: str,
    *,
    file: str = "<spec>",
    base_dir: str | os.PathLike[str] | None = None,
    path: Path | None = None,
) -> LoadedSpec:
    """Validate spec ``text``; ``file`` is only used in error messages.

    An ``extends:`` path is resolved against ``base_dir`` (the current directory by default).
    """
    read: list[Problem] = []  # a duplicate key: reported with the schema's problems
    data, positions = read_spec_data(text, file=file, base_dir=base_dir, path=path, problems=read)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError([*read, *spec_problems(exc, positions, data)]) from None
    if read:
        raise SpecError(read)
    return LoadedSpec(spec=spec, path=path, base_dir=Path(base_dir or Path.cwd()), positions=positions)


def read_spec_data(
    text: str,
    *,
    file: str = "<spec>",
    base_dir: str | os.PathLike[str] | None = None,
    path: Path | None = None,
    problems: list[Problem] | None = None,
) -> tuple[dict[str, Any], Positions]:
    """The spec's data (``extends:`` merged in) and its positions, before validation.

    The problems of its YAML that leave it readable (a duplicate key) are added to
    ``problems`` when it is given, so they are reported with the rest; else they raise.
    """
    data, positions, found = read_yaml(text, file)
    if found and problems is None:
        raise SpecError(found)
    problems = problems if problems is not None else []
    problems += found
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
    chain = (path.resolve(),) if path is not None else ()
    return resolve_extends(data, positions, Path(base_dir or Path.cwd()), chain)
