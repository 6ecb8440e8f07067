"""``type: mixture``: one lazy table drawn from several sources (files and generators) by weight.

Positions are dealt in blocks of ``BLOCK``: each source owns a fixed share of a block's slots
(its weight, by largest remainder) at seeded places, the same in every block. Position ``i`` is
then slot ``i mod BLOCK`` of block ``i div BLOCK``, which names the source and the source row
in O(1): task ``i`` is the same on every server, proportions hold exactly in every block, and
no source row is used twice. The table ends where its first source runs out of rows (a
generated source with 10⁹ rows never does). Every row records its source's name in the
``source`` field (for `eval --group-by source`) and gets a unique ``id``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from envbuilder.data._base import Row, Source, SourceConfig, Table, sources
from envbuilder.data._maps import Identity, IndexMap, Permutation
from envbuilder.data._splits import clash_message, rename_clashes
from envbuilder.errors import DataError
from envbuilder.plugins import ConfigModel, PluginField

__all__ = ["BLOCK", "MixtureConfig", "MixtureSource", "MixtureTable"]

#: Slots per block: weights are honoured to 1/BLOCK in every block.
BLOCK = 1000

NestedSource = Annotated[SourceConfig, PluginField(sources)]


class MixtureEntry(ConfigModel):
    """One source of a mixture."""

    model_config = ConfigDict(defer_build=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The source's name: the `source` field of its tasks and the start of their ids."""
    dataset: NestedSource
    """The source itself: any `dataset:` block (`parquet`, `jsonl`, `reasoning_gym`, …)."""
    splits: dict[str, str] = Field(default_factory=dict)
    """Mixture split → this source's split, e.g. `{test: hard}` (default: the same name)."""
    rename: dict[str, str] = Field(default_factory=dict)
    """Rename this source's columns so the sources line up: `{problem: question}`."""
    shuffle: bool = False
    """Take this source's rows in a seeded pseudo-random order (the mixture's `seed`)."""


class MixtureConfig(SourceConfig):
    """Several sources mixed by weight, deterministically per index; each task records its
    source in the `source` field."""

    model_config = ConfigDict(defer_build=True)

    type: Literal["mixture"]
    sources: list[MixtureEntry] = Field(min_length=1)
    """The sources mixed, each a named `dataset:` block."""
    weights: list[float] | None = None
    """One non-negative weight per source: its share of the tasks (default: equal shares)."""
    seed: int = 0
    """Fixes where each source's tasks fall in the mixture."""
    num_tasks: int | None = Field(default=None, ge=1)
    """At most this many tasks per split (default: until the first source runs out)."""

    @field_validator("sources")
    @classmethod
    def _distinct(cls, value: list[MixtureEntry]) -> list[MixtureEntry]:
        names = [s.name for s in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two sources are named {twice[0]!r}; names must be distinct")
        return value

    @field_validator("weights")
    @classmethod
    def _one_per_source(cls, value: list[float] | None, info: ValidationInfo) -> list[float] | None:
        n = len(info.data.get("sources") or [])
        if value is not None:
            if n and len(value) != n:
                raise ValueError(f"give one weight per source ({n}), not {len(value)}")
            if any(w < 0 for w in value) or sum(value) <= 0:
                raise ValueError("weights must be non-negative and not all zero")
        return value


def shares(weights: list[float], block: int = BLOCK) -> list[int]:
    """Slots per block for each weight (largest remainder; every positive weight gets one)."""
    total = sum(weights)
    exact = [w / total * block for w in weights]
    counts = [int(x) if w > 0 else 0 for x, w in zip(exact, weights, strict=True)]
    for i, w in enumerate(weights):
        if w > 0 and counts[i] == 0:
            counts[i] = 1
    order = sorted(range(len(weights)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    k = 0
    while sum(counts) < block:
        if weights[order[k % len(order)]] > 0:
            counts[order[k % len(order)]] += 1
        k += 1
    while sum(counts) > block:
        i = max(range(len(counts)), key=lambda j: counts[j])
        counts[i] -= 1
    return counts


class _Part:
    """One source of a mixture split: its table, its row order and its column names."""

    def __init__(self, name: str, label: str, table: Table, order: IndexMap, rename: dict[str, str]):
        self.name, self.label, self.table, self.order, self.rename = name, label, table, order, rename
        self.columns = [rename.get(c, c) for c in table.columns]
        self.has_id = "id" in self.columns

    def row(self, k: int) -> Row:
        local = self.order[k]
        raw = self.table.row(local)
        row = {self.rename.get(c, c): v for c, v in raw.items()} if self.rename else dict(raw)
        own = row.get("id") if self.has_id else None
        row["id"] = f"{self.name}-{own if own is not None else f'{self.label}-{local}'}"
        row["source"] = self.name
        return row


class MixtureTable(Table):
    """Rows dealt from several tables by weight (see the module docstring)."""

    def __init__(self, parts: list[_Part], weights: list[float], seed: int, limit: int | None):
        self.parts = parts
        counts = shares(weights)
        slots = [p for p, c in enumerate(counts) for _ in range(c)]
        random.Random(f"mixture:{seed}").shuffle(slots)
        self.slot_part = slots
        seen = [0] * len(parts)
        self.slot_rank = []
        for p in slots:
            self.slot_rank.append(seen[p])
            seen[p] += 1
        self.counts = counts
        n = min(self._end(p) for p in range(len(parts)) if counts[p] > 0)
        self.n = n if limit is None else min(n, limit)
        columns = ["id", "source"]
        for part in parts:
            columns += [c for c in part.columns if c not in columns]
        self._columns = columns
        self.generated = any(part.table.generated for part in parts)

    def _end(self, p: int) -> int:
        """The first position at which part ``p`` has no row left."""
        blocks, left = divmod(len(self.parts[p].order), self.counts[p])
        at = [s for s, q in enumerate(self.slot_part) if q == p][left]
        return blocks * BLOCK + at

    @property
    def columns(self) -> list[str]:
        return self._columns

    def __len__(self) -> int:
        return self.n

    def locate(self, index: int) -> tuple[int, int]:
        """(part, row of that part's order) of position ``index``."""
        block, slot = divmod(index, BLOCK)
        p = self.slot_part[slot]
        return p, block * self.counts[p] + self.slot_rank[slot]

    def row(self, index: int) -> Row:
        p, k = self.locate(index)
        row = self.parts[p].row(k)
        return {c: row.get(c) for c in self._columns}

    def rows(self, start: int, stop: int) -> list[Row]:
        return [self.row(i) for i in range(start, stop)]


class MixtureSource(Source):
    Config = MixtureConfig
    config: MixtureConfig

    def __init__(self, config: MixtureConfig, base_dir: Path):
        super().__init__(config, base_dir)
        self.members: list[Source] = [
            sources.for_config(e.dataset)(e.dataset, base_dir) for e in config.sources
        ]

    def _own_splits(self, i: int) -> dict[str, str]:
        entry = self.config.sources[i]
        names = self.members[i].split_names()
        mapped = {mine: theirs for mine, theirs in entry.splits.items()}
        return {**{n: n for n in names if n not in mapped.values()}, **mapped}

    def split_names(self) -> list[str]:
        per = [self._own_splits(i) for i in range(len(self.members))]
        common = [s for s in per[0] if all(s in other for other in per[1:])]
        if not common:
            raise DataError(
                "the mixture's sources share no split name",
                hint="Map each source's splits onto common names with `splits:`, e.g. `{test: hard}`",
                code="mixture_no_split",
            )
        return common

    def open(self, split: str) -> Table:
        parts = []
        for i, (entry, member) in enumerate(zip(self.config.sources, self.members, strict=True)):
            theirs = self._own_splits(i)[split]
            if theirs not in member.split_names():
                raise DataError(
                    f"source {entry.name!r} has no split {theirs!r}",
                    hint=f"Its splits are: {', '.join(member.split_names())}",
                    code="unknown_split",
                )
            table = member.open(theirs)
            order: IndexMap = Identity(len(table))
            if entry.shuffle:
                order = Permutation(order, self.config.seed)
            part = _Part(entry.name, theirs, table, order, entry.rename)
            clashes = rename_clashes({c: entry.rename.get(c, c) for c in table.columns})
            if clashes:
                old, new, other = clashes[0]
                raise DataError(
                    f"sources[{i}].rename: {clash_message(old, new, other, f'source {entry.name!r}')}",
                    hint=f"Rename it to a name no column of the source has, or rename {new!r} as well"
                    if other == new
                    else "Give each column a name of its own",
                    code="rename_clash",
                )
            if "source" in part.columns:
                raise DataError(
                    f"source {entry.name!r} has a column named 'source', which the mixture sets",
                    hint=f"Rename it: `sources[{i}].rename: {{source: origin}}`",
                    code="mixture_column_taken",
                )
            parts.append(part)
        weights = self.config.weights or [1.0] * len(parts)
        return MixtureTable(parts, weights, self.config.seed, self.config.num_tasks)

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "sources")

    def describe(self) -> dict[str, Any]:
        weights = self.config.weights or [1.0] * len(self.members)
        return {
            "type": "mixture",
            "sources": [
                {"name": e.name, "weight": w, **m.describe()}
                for e, w, m in zip(self.config.sources, weights, self.members, strict=True)
            ],
        }

    def files(self) -> list[Path]:
        return sorted({f for m in self.members for f in m.files()})
