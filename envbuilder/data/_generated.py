"""Generated sources: rows computed from (config, seed, index) instead of read from a file.

A generated table holds no rows. Row ``i`` of a source split is computed on demand by a
deterministic function of the split's level config, the split's seed and ``i``, so every server,
every restart and every replica serves the same task ``i``, a table of 10⁹ rows opens in
microseconds and costs no memory, and the index maps of ``_maps`` (slices, shuffles, limits)
work on it as on a file.

The source splits of a generated source are its difficulty ``levels`` (`easy`, `medium`,
`hard`: the same generator with different configs, each row carrying its level in the
``difficulty`` field); a source without levels has the splits ``train``, ``validation`` and
``test`` of one config, seeded apart.

``type: generator`` calls a plugin: a callable registered in the ``envbuilder.generators``
entry-point group that turns ``(config, seed, index)`` into a row (a dict of JSON values).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from envbuilder.data._base import Row, Source, SourceConfig, Table
from envbuilder.data._convert import to_json
from envbuilder.errors import DataError
from envbuilder.plugins import Registry

__all__ = [
    "DEFAULT_LEVEL",
    "GeneratedTable",
    "GeneratorConfig",
    "GeneratorSource",
    "LevelsConfig",
    "derive_seed",
    "generators",
]

#: The `difficulty` of the rows of a source without `levels`.
DEFAULT_LEVEL = "default"
#: The source splits of a source without `levels`.
PLAIN_SPLITS = ("train", "validation", "test")
#: The most rows a generated source split may declare (ids and seeds stay 64-bit).
MAX_TASKS = 10**15

Generate = Callable[[dict[str, Any], int, int], Row]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (stable across processes and Python versions, unlike hash())."""
    text = ":".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


class LevelsConfig(SourceConfig):
    """Keys every generated source shares: how many rows, the seed, the difficulty levels."""

    num_tasks: int = Field(default=1_000_000, ge=1, le=MAX_TASKS)
    """Rows per source split; any size (10⁹ costs no memory: rows are computed on demand)."""
    seed: int = 0
    """The seed of every row: with the split's name and the row's index it fixes the row."""
    levels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Difficulty levels, each a source split (`splits: {train: {source: easy}}`) whose config
    overrides the base config, e.g. `{easy: {max_digits: 2}, hard: {max_digits: 6}}`. Every row
    carries its level in the `difficulty` field. Without levels the source splits are `train`,
    `validation` and `test` of the base config, seeded apart."""


class GeneratedTable(Table):
    """Rows ``0..n-1`` computed by ``make(index)``; the ``difficulty`` field is the level's name."""

    generated = True

    def __init__(self, make: Callable[[int], Row], n: int, level: str, columns: list[str]):
        self.make, self.n, self.level = make, n, level
        self._columns = columns

    @property
    def columns(self) -> list[str]:
        return self._columns

    def __len__(self) -> int:
        return self.n

    def row(self, index: int) -> Row:
        row = self.make(index)
        if not isinstance(row, dict):
            raise DataError(
                f"a generator returned a {type(row).__name__} for row {index}, not a dict",
                hint="A generator returns one row: a dict of column → value",
                code="generator_failed",
            )
        return {**row, "difficulty": self.level}

    def rows(self, start: int, stop: int) -> list[Row]:
        return [self.row(i) for i in range(start, stop)]


class _Generated(Source):
    """What generated sources share: levels as source splits, rows from ``make``."""

    config: LevelsConfig

    def split_names(self) -> list[str]:
        return list(self.config.levels) or list(PLAIN_SPLITS)

    def level_config(self, split: str) -> tuple[str, dict[str, Any]]:
        """The split's level name and its overrides of the base config."""
        if self.config.levels:
            return split, self.config.levels[split]
        return DEFAULT_LEVEL, {}

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "levels", split) if self.config.levels else ("dataset",)

    def split_seed(self, split: str) -> int:
        return derive_seed(self.config.seed, split)

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "num_tasks": self.config.num_tasks, "levels": self.split_names()}


class GeneratorConfig(LevelsConfig):
    """Rows made by a generator plugin: a callable `(config, seed, index) -> row`."""

    type: Literal["generator"]
    generator: str
    """The generator's name in the `envbuilder.generators` entry-point group (e.g. `arithmetic`)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The generator's config (each level's keys override it)."""


generators: Registry[Generate] = Registry(
    "generator", "envbuilder.generators", what="generator", known="generators", error=DataError
)
"""The row generators (``type: generator``), by their entry point's name in ``envbuilder.generators``."""


class GeneratorSource(_Generated):
    Config = GeneratorConfig
    config: GeneratorConfig

    def split_names(self) -> list[str]:
        generators.get(self.config.generator)  # an unknown name: one error, not one per split
        return super().split_names()

    def open(self, split: str) -> Table:
        fn = generators.get(self.config.generator)
        level, overrides = self.level_config(split)
        config = {**self.config.config, **overrides}
        seed = self.split_seed(split)

        def make(index: int) -> Row:
            try:
                row = fn(config, seed, index)
            except Exception as exc:  # plugin code: its failure is this row's data error
                raise DataError(
                    f"generator {self.config.generator!r} failed on row {index} of {split!r}: "
                    f"{type(exc).__name__}: {exc}",
                    hint="Check the generator's config",
                    code="generator_failed",
                ) from None
            return to_json(row) if isinstance(row, dict) else row

        first = make(0)
        if not isinstance(first, dict):
            raise DataError(
                f"generator {self.config.generator!r} returned a {type(first).__name__}, not a dict",
                hint="A generator returns one row: a dict of column → value",
                code="generator_failed",
            )
        columns = [*first, *(["difficulty"] if "difficulty" not in first else [])]
        return GeneratedTable(make, self.config.num_tasks, level, columns)
