"""Open the splits a spec declares: map each onto source rows and shape its rows into tasks.

Per split, in order: the source split (or `files`) → `filter` → `slice` → minus the rows carved
out by other splits → `shuffle` → `limit`. A carved split (`carve_from`) takes a seeded random
`fraction` of its parent's rows after the parent's filter and slice, then its own shuffle and
limit. Every step is an index map over one lazily read table (see ``_maps``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuilder.data._base import Source, Table, sources
from envbuilder.data._filter import RowFilter, filter_profiled, filter_rows
from envbuilder.data._maps import Complement, Gather, Identity, IndexMap, Permutation, Window, slice_bounds
from envbuilder.data._profile import read_profile
from envbuilder.data._splits import SplitView, TaskShaper, clash_message, rename_clashes
from envbuilder.errors import DataError, EnvbuilderError, Loc, name_hint
from envbuilder.paths import check_inside

if TYPE_CHECKING:  # spec imports data at run time (its dataset models), so data names it only here
    from envbuilder.spec import Spec, SplitSpec, TaskShape

Errors = list[tuple[Loc, EnvbuilderError]]


def open_splits(spec: Spec, base_dir: Path) -> tuple[Source, dict[str, SplitView], Errors]:
    """The source, the splits that opened, and the located errors of those that did not."""
    errors: Errors = []
    source: Source = sources.for_config(spec.dataset)(spec.dataset, base_dir)
    try:
        source_splits = source.split_names()
    except DataError as exc:
        return source, {}, [(("dataset",), exc)]
    tables: dict[str, Table] = {}
    pools: dict[str, tuple[Table, IndexMap, str]] = {}
    for name, split in spec.splits.items():
        if split.carve_from is None:
            opened = _pool(source, source_splits, tables, name, split, errors)
            if opened is not None:
                pools[name] = opened
    maps = {name: pool for name, (_, pool, _) in pools.items()}
    taken: dict[str, list[int]] = {}
    for name, split in spec.splits.items():
        parent = split.carve_from
        if parent is None:
            continue
        if parent not in pools:
            if parent not in spec.splits or spec.splits[parent].carve_from is not None:
                others = [n for n, s in spec.splits.items() if s.carve_from is None]
                errors.append(
                    (
                        ("splits", name, "carve_from"),
                        DataError(
                            f"no split {parent!r} to carve from",
                            hint=f"Name one of: {', '.join(others)}",
                            code="unknown_split",
                        ),
                    )
                )
            continue
        table, pool, label = pools[parent]
        assert split.fraction is not None  # SplitSpec: `carve_from` and `fraction` go together
        used = taken.setdefault(parent, [])
        left = Complement(Identity(len(pool)), used)
        k = min(len(left), round(split.fraction * len(pool)))
        rng = random.Random(f"carve:{split.seed}:{name}")
        mine = sorted(left[j] for j in rng.sample(range(len(left)), k))
        used[:] = sorted([*used, *mine])
        pools[name] = (table, Gather(pool, mine), label)
        maps[name] = pools[name][1]
    for parent, used in taken.items():
        maps[parent] = Complement(pools[parent][1], used)

    views: dict[str, SplitView] = {}
    for name, split in spec.splits.items():
        if name not in pools:
            continue
        table, _, label = pools[name]
        index = maps[name]
        if split.shuffle:
            index = Permutation(index, split.seed)
        if split.limit is not None:
            index = Window(index, 0, min(split.limit, len(index)))
        views[name] = SplitView(name, split.type, table, _shaper(spec.task, label, table, errors), index)
    return source, views, errors


def _pool(
    source: Source,
    source_splits: list[str],
    tables: dict[str, Table],
    name: str,
    split: SplitSpec,
    errors: Errors,
) -> tuple[Table, IndexMap, str] | None:
    """The split's table and its rows after `filter` and `slice`, or None (error recorded)."""
    try:
        if split.files is not None:
            label = name
            table = source.open_files(split.files, f"splits.{name}.files")
        else:
            label = split.source or name
            if label not in source_splits:
                errors.append(
                    (
                        ("splits", name, "source") if split.source else ("splits", name),
                        DataError(
                            f"the dataset has no split {label!r}",
                            hint=f"Its splits are: {', '.join(source_splits)}",
                            code="unknown_split",
                        ),
                    )
                )
                return None
            if label not in tables:
                tables[label] = source.open(label)
            table = tables[label]
    except DataError as exc:
        loc = ("splits", name, "files") if split.files is not None else source.location(split.source or name)
        errors.append((loc, exc))
        return None
    index: IndexMap = Identity(len(table))
    profile: dict[int, dict[str, Any]] | None = None
    if split.profile is not None:
        try:
            path = check_inside(source.base_dir / split.profile, source.base_dir)
            if path is None:
                raise DataError(
                    f"the profile {split.profile!r} is outside the spec's folder",
                    hint="Keep the table beside the spec, or allow its folder with `serve --data-root`",
                    code="data_outside",
                )
            profile = read_profile(path).rows_of(label)
        except DataError as exc:
            errors.append((("splits", name, "profile"), exc))
            return None
        index = Gather(index, sorted(r for r in profile if r < len(table)))
    if split.filter is not None:
        try:
            flt = RowFilter(split.filter, f"splits.{name}.filter")
            if profile is None:
                index = Gather(index, filter_rows(table, flt))
            else:
                index = Gather(index, filter_profiled(table, index, profile, flt))
        except EnvbuilderError as exc:
            # Reported; the split is still opened unfiltered so its columns can be checked.
            errors.append((("splits", name, "filter"), exc))
    if split.slice is not None:
        index = Window(index, *slice_bounds(split.slice, len(index)))
    return table, index, label


def _shaper(shape: TaskShape, label: str, table: Table, errors: Errors) -> TaskShaper:
    columns = table.columns
    wanted: list[tuple[Loc, str]] = [
        *((("task", "include", i), c) for i, c in enumerate(shape.include or [])),
        *((("task", "exclude", i), c) for i, c in enumerate(shape.exclude)),
        *((("task", "rename", c), c) for c in shape.rename),
        *([(("task", "id"), shape.id)] if shape.id is not None else []),
    ]
    missing = [(loc, c) for loc, c in wanted if c not in columns]
    reported = {loc for loc, _ in errors}
    for loc, column in missing:
        if loc in reported:
            continue  # the same key, already reported for another split
        errors.append(
            (
                loc,
                DataError(
                    f"split {label!r} has no column {column!r}",
                    hint=name_hint(column, columns, "Its columns are"),
                    code="unknown_column",
                ),
            )
        )
    # Reported; the shaper leaves the missing columns out (and a broken `include` keeps every
    # column), so templates are still checked without the same mistake reported again.
    absent = {c for _, c in missing}
    shaper = TaskShaper(
        label,
        id_column=shape.id if shape.id not in absent else None,
        include=None if absent.intersection(shape.include or ()) else shape.include,
        exclude=[c for c in shape.exclude if c not in absent],
        rename={k: v for k, v in shape.rename.items() if k not in absent},
        columns=columns,
    )
    for old, new, other in rename_clashes(shaper.rename):
        loc = ("task", "rename", old)
        if loc in reported:
            continue
        reported.add(loc)
        hint = (
            f"Rename it to a name no column has, rename {new!r} as well, or drop {new!r} with"
            f" `exclude: [{new}]`"
            if other == new
            else "Give each column a name of its own"
        )
        errors.append(
            (
                loc,
                DataError(clash_message(old, new, other, f"split {label!r}"), hint=hint, code="rename_clash"),
            )
        )
    return shaper
