"""What every dataset source provides: named source splits as lazy, index-addressable tables."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar

from envbuilder.errors import DataError
from envbuilder.plugins import Plugin, Registry
from envbuilder.spec import SourceConfig
from envbuilder.spec import sources as _sources

Row = dict[str, Any]


class Table(abc.ABC):
    """A lazy sequence of rows: its length and columns come from metadata, rows on demand."""

    generated: bool = False
    """True when rows are computed, not read (each costs real work; there may be 10⁹ of them)."""

    @property
    @abc.abstractmethod
    def columns(self) -> list[str]:
        """The column names, known without reading any row."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def rows(self, start: int, stop: int) -> list[Row]:
        """Rows ``start`` (inclusive) to ``stop`` (exclusive), 0 <= start <= stop <= len."""

    def identity(self) -> list[tuple[str, int, int]] | None:
        """(path, size, mtime) of the files behind the table, for cache keys; None if not file-backed."""
        return None

    def row(self, index: int) -> Row:
        """Row ``index`` (0 <= index < len)."""
        return self.rows(index, index + 1)[0]

    def read_block(self, index: int) -> int | None:
        """The block a random read of row ``index`` decodes whole (rows of one block cost one
        read together), for callers that sample rows at a bounded cost; None (the default) when
        a random row is cheap on its own."""
        return None


class Source(Plugin, abc.ABC):
    """A dataset source; registered in ``envbuilder.sources`` under its ``Config.type``."""

    Config: ClassVar[type[SourceConfig]]

    def __init__(self, config: Any, base_dir: Path):
        self.config = config
        self.base_dir = base_dir

    @abc.abstractmethod
    def split_names(self) -> list[str]:
        """The source's split names (cheap: no rows are read)."""

    @abc.abstractmethod
    def open(self, split: str) -> Table:
        """The lazy table of ``split``; raises DataError when it cannot be opened."""

    def open_files(self, files: str | list[str], key: str) -> Table:
        """A table of the given files in this source's format (a split's `files:`); ``key`` names
        the spec key in errors."""
        raise DataError(
            f"{key}: a `{self.type_name}` dataset does not take per-split files",
            hint="Use `source:` to name one of the dataset's splits",
            code="data_files_unsupported",
        )

    def location(self, split: str) -> tuple[str | int, ...]:
        """The spec key that declares ``split``'s data (where open() errors are reported)."""
        return ("dataset",)

    def describe(self) -> dict[str, Any]:
        """Where the data comes from, for catalogs and messages."""
        return {"type": self.type_name}

    def files(self) -> list[Path]:
        """The local files the source reads (hashed by catalogs, bundled by packs); none by default."""
        return []


sources: Registry[type[Source]] = _sources
