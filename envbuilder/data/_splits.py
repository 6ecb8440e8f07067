"""The splits an environment serves: source tables mapped to ORS splits, rows made into tasks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from envbuilder.data._base import Row, Table
from envbuilder.data._convert import needs_conversion, to_json
from envbuilder.data._maps import Identity, IndexMap, runs
from envbuilder.errors import TaskNotFound

Task = dict[str, Any]


class TaskShaper:
    """Turns a row into the task JSON: selected and renamed columns plus a stable ``id``."""

    def __init__(
        self,
        split: str,
        *,
        id_column: str | None = None,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        rename: dict[str, str] | None = None,
        columns: list[str],
    ):
        self.split = split
        keep = [c for c in (include if include is not None else columns) if c not in set(exclude or ())]
        self.rename = {c: (rename or {}).get(c, c) for c in keep}
        # A dataset's own `id` column is the id unless `exclude` drops it (then `<split>-<row>`).
        own_id = "id" in columns and "id" not in set(exclude or ())
        self.id_column = id_column if id_column is not None else ("id" if own_id else None)
        self.identity = all(k == v for k, v in self.rename.items()) and keep == columns

    @property
    def fields(self) -> list[str]:
        """The keys of every task this shaper makes."""
        names = list(self.rename.values())
        return names if "id" in names else ["id", *names]

    def __call__(self, row: Row, index: int) -> Task:
        """The task of ``row``, the ``index``-th row of the source split."""
        if needs_conversion(row):
            row = to_json(row)
        task: Task = {}
        if self.id_column is not None:
            task["id"] = row[self.id_column]
        else:
            task["id"] = f"{self.split}-{index}"
        if self.identity:
            for key, value in row.items():
                if key != "id" or self.id_column == "id":
                    task[key] = value
            return task
        for old, new in self.rename.items():
            task[new] = row[old]
        return task


def rename_clashes(names: dict[str, str]) -> list[tuple[str, str, str]]:
    """The renames that give two columns one name: ``(old, new, other)`` for each column ``old``
    renamed to ``new``, a name column ``other`` ends up with too (its own name, or another
    rename). ``names`` maps each column kept to its name after renaming. A row holds one value
    per name, so one of the two would be silently lost."""
    holders: dict[str, list[str]] = {}
    for old, new in names.items():
        holders.setdefault(new, []).append(old)
    clashes = []
    for new, olds in holders.items():
        if len(olds) < 2:
            continue
        # the column that already has the name first, then the renames in order
        olds.sort(key=lambda c: c != new)
        clashes += [(old, new, olds[0] if old != olds[0] else olds[1]) for old in olds if old != new]
    return clashes


def clash_message(old: str, new: str, other: str, where: str) -> str:
    """What :func:`rename_clashes`' ``(old, new, other)`` does to the rows of ``where``."""
    if other == new:
        return f"renaming {old!r} to {new!r} hides the column {new!r} that {where} already has"
    return f"renaming {old!r} to {new!r} clashes with {other!r}, renamed to {new!r} too"


class SplitView:
    """One ORS split: a typed, lazily read sequence of tasks (an index map over a table)."""

    def __init__(self, name: str, type: str, table: Table, shaper: TaskShaper, index: IndexMap | None = None):
        self.name = name
        self.type = type
        self.table = table
        self.shaper = shaper
        self.index: IndexMap = index if index is not None else Identity(len(table))

    def __len__(self) -> int:
        return len(self.index)

    def task(self, index: int) -> Task:
        """Task ``index``; negative indices count from the end. Raises TaskNotFound."""
        n = len(self.index)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise TaskNotFound(
                f"index {index} is out of range for split {self.name!r} ({n} tasks)",
                code="invalid_index",
            )
        row = self.index[i]
        return self.shaper(self.table.row(row), row)

    def task_range(self, start: int | None, stop: int | None) -> list[Task]:
        """Tasks ``start:stop`` with Python slice semantics (clamped, never an error); contiguous
        source rows are read together."""
        lo, hi, _ = slice(start, stop).indices(len(self.index))
        out: list[Task] = []
        for first, end in runs(self.index, lo, hi) if lo < hi else ():
            out.extend(self.shaper(row, first + k) for k, row in enumerate(self.table.rows(first, end)))
        return out

    def iter_batches(self, batch: int = 1024) -> Iterator[list[Task]]:
        """Every task, in contiguous batches (for streaming a whole split)."""
        n = len(self.index)
        for lo in range(0, n, batch):
            yield self.task_range(lo, min(n, lo + batch))
