"""Parquet files as lazy tables: counts from metadata, rows from a row group or a background row index.

Opening a table reads only the files' footers. A random row first costs decoding the row group
that holds it (a small LRU keeps the last few). When the row groups are too large for that to be
fast, the rows are re-encoded once into an Arrow IPC file of small batches in the cache (see
``_cache``) by a child process that a background thread waits for (``_rowindex``: the work
would otherwise compete with the server for the interpreter's lock); from then on, in this and
every later process, a random row costs one small positioned read. Nothing waits for it: until
the index is complete, rows come from the row groups as before.
"""

from __future__ import annotations

import bisect
import glob
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from envbuilder.data._base import Row, Source, SourceConfig, Table
from envbuilder.data._cache import build_lock, cache_key, cache_path, file_identity
from envbuilder.data._ipc import IpcTable
from envbuilder.data._remote import fetch, is_url
from envbuilder.data._rowindex import write_row_index
from envbuilder.errors import DataError
from envbuilder.paths import check_inside

log = logging.getLogger("envbuilder.data")

PathOrPaths = str | list[str]


class ParquetConfig(SourceConfig):
    """Parquet files (local, or at URLs), per source split."""

    type: Literal["parquet"]
    files: dict[str, PathOrPaths] = Field(min_length=1)
    """Source split name → a file, a glob, a directory of `.parquet` files, or a list of these;
    relative to the spec file; or the `s3://`, `gs://`, `https://` or `hf://` URL of one file (fetched
    once into the cache)."""


class ParquetSource(Source):
    Config = ParquetConfig
    config: ParquetConfig

    def split_names(self) -> list[str]:
        return list(self.config.files)

    def open(self, split: str) -> Table:
        return self.open_files(self.config.files[split], f"dataset.files.{split}")

    def open_files(self, files: PathOrPaths, key: str) -> Table:
        return ParquetTable(resolve_paths(files, self.base_dir, key, suffix=".parquet"))

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "files", split)

    def describe(self) -> dict[str, object]:
        return {"type": "parquet", "files": dict(self.config.files)}

    def files(self) -> list[Path]:
        found = (
            resolve_paths(p, self.base_dir, f"dataset.files.{s}", remote=False)
            for s, p in self.config.files.items()
        )
        return sorted({path for paths in found for path in paths})


def resolve_paths(
    patterns: PathOrPaths, base_dir: Path, key: str, suffix: str = ".parquet", *, remote: bool = True
) -> list[Path]:
    """Expand files, globs and directories (relative to ``base_dir``) into sorted file paths; a URL
    (``s3://``, ``gs://``, ``https://``, ``hf://``) is fetched into the cache (skipped when not
    ``remote``: it is not one of the spec's own files)."""
    out: list[Path] = []
    kind = "Parquet" if suffix == ".parquet" else suffix.lstrip(".").upper()
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        if is_url(pattern):
            if remote:
                out.append(fetch(pattern))
            continue
        path = Path(pattern).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if path.is_dir():
            found = sorted(path.glob(f"*{suffix}"))
        elif any(ch in pattern for ch in "*?["):
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
        else:
            found = [path] if path.is_file() else []
        if not found:
            raise DataError(
                f"no {kind} file at {pattern!r} (looked in {path})",
                hint=f"Paths in `{key}` are relative to the spec file; check the name or the glob",
                code="data_not_found",
            )
        outside = [f for f in found if check_inside(f, base_dir) is None]
        if outside:
            target = outside[0].resolve()
            link = f" (a link to {target})" if str(target) != os.path.normpath(outside[0].absolute()) else ""
            raise DataError(
                f"{pattern!r} names {outside[0]}{link}, which is outside the spec's folder {base_dir}",
                hint=f"Keep the data of `{key}` beside the spec, or let the operator allow the folder "
                "(envbuilder serve --data-root DIR, or $ENVBUILDER_DATA_ROOTS)",
                code="data_outside",
            )
        out.extend(found)
    return out


class ParquetTable(Table):
    """Rows of one or more Parquet files; only the row group holding a row is decoded."""

    CACHE_ROW_GROUPS = 4
    #: Build the background row index when row groups are larger than this and there are more
    #: of them than the LRU holds (small datasets are fast from the LRU alone).
    INDEX_ABOVE_GROUP_ROWS = 4096

    def __init__(self, paths: list[Path], *, index: bool = True):
        self.paths = paths
        self._files: list[pq.ParquetFile] = []
        self._groups: list[tuple[int, int]] = []  # (file index, row group index)
        self._starts: list[int] = []  # first global row of each group
        total = 0
        largest = 0
        schema: pa.Schema | None = None
        for fi, path in enumerate(paths):
            try:
                pf = pq.ParquetFile(path, memory_map=False)
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
                rows = meta.row_group(rg).num_rows
                largest = max(largest, rows)
                total += rows
        self._len = total
        self._schema = schema if schema is not None else pa.schema([])
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()
        self._lock = threading.Lock()
        self._identity = file_identity(paths)
        self._fast: IpcTable | None = None
        self.index_thread: threading.Thread | None = None
        if index and largest > self.INDEX_ABOVE_GROUP_ROWS and len(self._groups) > self.CACHE_ROW_GROUPS:
            self._start_index()

    @property
    def columns(self) -> list[str]:
        return list(self._schema.names)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def __len__(self) -> int:
        return self._len

    def identity(self) -> list[tuple[str, int, int]]:
        return self._identity

    # -- the background row index ---------------------------------------------------------------

    @property
    def index_path(self) -> Path:
        return cache_path("rows", cache_key("parquet-rows", self._identity), ".arrow")

    @property
    def indexed(self) -> bool:
        """Whether random rows are served from the row index."""
        return self._fast is not None

    def _built_index(self) -> IpcTable | None:
        """The row index already in the cache (built by an earlier or another process)."""
        if self.index_path.exists():
            try:
                fast = IpcTable(self.index_path)
                if len(fast) == self._len:
                    return fast
            except DataError:
                pass
        return None

    def _start_index(self) -> None:
        self._fast = self._built_index()
        if self._fast is not None:
            return
        self.index_thread = threading.Thread(
            target=self._build_index, name="envbuilder-row-index", daemon=True
        )
        self.index_thread.start()

    def _build_index(self) -> None:
        started = time.monotonic()
        try:
            with build_lock(self.index_path):  # once per host: other workers wait, then read it
                fast = self._built_index()
                built = fast is None
                if fast is None:
                    # In a child process: this thread only waits (see _rowindex).
                    write_row_index(self.index_path, self.paths)
                    fast = IpcTable(self.index_path)
        except (OSError, pa.ArrowException, DataError) as exc:
            log.warning("row index for %s not built (%s); rows come from the row groups", self.paths[0], exc)
            return
        self._fast = fast
        with self._lock:
            self._cache.clear()
        log.info(
            "row index of %s rows %s in %.1f s: %s",
            f"{self._len:,}",
            "built" if built else "found",
            time.monotonic() - started,
            self.index_path,
        )

    def read_block(self, index: int) -> int | None:
        # Until the row index is built, a random row decodes its whole row group.
        return None if self._fast is not None else bisect.bisect_right(self._starts, index) - 1

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Wait for the background index (tests, benchmarks); True when rows come from it."""
        if self.index_thread is not None:
            self.index_thread.join(timeout)
        return self.indexed

    # -- rows -------------------------------------------------------------------------------------

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
        fast = self._fast
        if fast is not None:
            return fast.rows(start, stop)
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
