"""Open the splits a spec declares: map each onto a source split and shape its rows into tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envbuilder.data._base import Source, sources
from envbuilder.data._splits import SplitView, TaskShaper
from envbuilder.errors import DataError, EnvbuilderError

Loc = tuple[str | int, ...]


def open_splits(
    spec: Any, base_dir: Path
) -> tuple[Source, dict[str, SplitView], list[tuple[Loc, EnvbuilderError]]]:
    """The source, the splits that opened, and the located errors of those that did not.

    ``spec`` is a :class:`envbuilder.spec.Spec` (typed loosely: data must not import spec).
    """
    errors: list[tuple[Loc, EnvbuilderError]] = []
    source: Source = sources.for_config(spec.dataset)(spec.dataset, base_dir)
    source_splits = source.split_names()
    views: dict[str, SplitView] = {}
    for name, split in spec.splits.items():
        source_split = split.source or name
        if source_split not in source_splits:
            errors.append(
                (
                    ("splits", name, "source") if split.source else ("splits", name),
                    DataError(
                        f"the dataset has no split {source_split!r}",
                        hint=f"Its splits are: {', '.join(source_splits)}",
                    ),
                )
            )
            continue
        try:
            table = source.open(source_split)
        except DataError as exc:
            errors.append((("dataset",), exc))
            continue
        shape = spec.task
        wanted = [*(shape.include or []), *shape.exclude, *shape.rename, *([shape.id] if shape.id else [])]
        missing = [c for c in wanted if c not in table.columns]
        if missing:
            errors.append(
                (
                    ("task",),
                    DataError(
                        f"split {name!r} has no column {missing[0]!r}",
                        hint=f"Its columns are: {', '.join(table.columns)}",
                    ),
                )
            )
            continue
        shaper = TaskShaper(
            name,
            id_column=shape.id,
            include=shape.include,
            exclude=shape.exclude,
            rename=shape.rename,
            columns=table.columns,
        )
        views[name] = SplitView(name, split.type, table, shaper)
    return source, views, errors
