"""Parquet files as lazy tables: counts from metadata, rows decoded one row group at a time."""

from __future__ import annotations

import bisect
import glob
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from envbuilder.data._base import Row, Source, SourceConfig, Table
from envbuilder.errors import DataError

PathOrPaths = str | list[str]


class ParquetConfig(SourceConfig):
    """Local Parquet files, per source split."""

    type: Literal["parquet"]
    files: dict[str, PathOrPaths] = Field(min_length=1)
    """Source split name → a file, a glob, a directory of `.parquet` files, or a list of these;
    relative to the spec file."""


class ParquetSource(Source):
    Config = ParquetConfig
    config: ParquetConfig

    def split_names(self) -> list[str]:
        return list(self.config.files)

    def open(self, split: str) -> Table:
        patterns = self.config.files[split]
        return ParquetTable(resolve_paths(patterns, self.base_dir, f"dataset.files.{split}"))

    def describe(self) -> dict[str, object]:
        return {"type": "parquet", "files": dict(self.config.files)}

    def files(self) -> list[Path]:
        found = (resolve_paths(p, self.base_dir, f"dataset.files.{s}") for s, p in self.config.files.items())
        return sorted({path for paths in found for path in paths})


def resolve_paths(patterns: PathOrPaths, base_dir: Path, key: str) -> list[Path]:
    """Expand files, globs and directories (relative to ``base_dir``) into sorted file paths."""
    out: list[Path] = []
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        path = Path(pattern).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if path.is_dir():
            found = sorted(path.glob("*.parquet"))
        elif any(ch in pattern for ch in "*?["):
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
        else:
            found = [path] if path.exists() else []
        if not found:
            raise DataError(
                f"{key}: no Parquet file at {pattern!r} (looked in {path})",
                hint="Paths are relative to the spec file; check the name or the glob",
                code="data_not_found",
            )
        out.extend(found)
    return out


class ParquetTable(Table):
    """Rows of one or more Parquet files; only the row group holding a row is decoded."""

    CACHE_ROW_GROUPS = 4

    def __init__(self, paths: list[Path]):
        self.paths = paths
        self._files: list[pq.ParquetFile] = []
        self._groups: list[tuple[int, int]] = []  # (file index, row group index)
        self._starts: list[int] = []  # first global row of each group
        total = 0
        schema: pa.Schema | None = None
        for fi, path in enumerate(paths):
            try:
                pf = pq.ParquetFile(path, memory_map=True)
            except (OSError, pa.ArrowInvalid) as exc:
                raise DataError(
                    f"cannot open Parquet file {str(path)!r}: {exc}", code="data_unreadable"
                ) from None
            if schema is None:
                schema = pf.schema_arrow
            elif pf.schema_arrow.names != schema.names:
                raise DataError(
                    f"Parquet file {str(path)!r} has columns {pf.schema_arrow.names}, "
                    f"but {str(paths[0])!r} has {schema.names}",
                    hint="All files of one split must share a schema",
                    code="data_schema_mismatch",
                )
            self._files.append(pf)
            meta = pf.metadata
            for rg in range(meta.num_row_groups):
                self._groups.append((fi, rg))
                self._starts.append(total)
                total += meta.row_group(rg).num_rows
        self._len = total
        self._schema = schema if schema is not None else pa.schema([])
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def columns(self) -> list[str]:
        return list(self._schema.names)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def __len__(self) -> int:
        return self._len

    def _group(self, g: int) -> pa.Table:
        with self._lock:
            table = self._cache.get(g)
            if table is not None:
                self._cache.move_to_end(g)
                return table
        fi, rg = self._groups[g]
        table = self._files[fi].read_row_group(rg)
        with self._lock:
            self._cache[g] = table
            while len(self._cache) > self.CACHE_ROW_GROUPS:
                self._cache.popitem(last=False)
        return table

    def rows(self, start: int, stop: int) -> list[Row]:
        out: list[Row] = []
        i = start
        while i < stop:
            g = bisect.bisect_right(self._starts, i) - 1
            first = self._starts[g]
            table = self._group(g)
            take = min(stop, first + table.num_rows) - i
            out.extend(table.slice(i - first, take).to_pylist())
            i += take
        return out
