"""JSONL, JSON and CSV files as lazy tables: converted once into the cache's Arrow row files.

The first open parses the files with pyarrow (streaming for CSV) into an Arrow IPC file of small
batches keyed by the files' identity (see ``_cache``); every later open, and every row read,
goes to that file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
from pydantic import Field

from envbuilder.data._base import Source, SourceConfig, Table
from envbuilder.data._cache import cache_key, cache_path, file_identity
from envbuilder.data._ipc import IpcTable, write_ipc
from envbuilder.data._parquet import PathOrPaths, resolve_paths
from envbuilder.errors import DataError


class _FilesConfig(SourceConfig):
    files: dict[str, PathOrPaths] = Field(min_length=1)
    """Source split name → a file, a glob, a directory, or a list of these; relative to the spec file;
    or the `s3://`, `gs://`, `https://` or `hf://` URL of one file (fetched once into the cache)."""


class JsonlConfig(_FilesConfig):
    """Local JSON Lines files (one JSON object per line), per source split."""

    type: Literal["jsonl"]


class JsonConfig(_FilesConfig):
    """Local JSON files holding an array of objects (or `{"data": [...]}`), per source split."""

    type: Literal["json"]


class CsvConfig(_FilesConfig):
    """Local CSV files with a header row, per source split."""

    type: Literal["csv"]


class _FileSource(Source):
    config: _FilesConfig
    suffix: ClassVar[str]

    def split_names(self) -> list[str]:
        return list(self.config.files)

    def open(self, split: str) -> Table:
        return self.open_files(self.config.files[split], f"dataset.files.{split}")

    def open_files(self, files: PathOrPaths, key: str) -> Table:
        paths = resolve_paths(files, self.base_dir, key, suffix=self.suffix)
        path = cache_path("rows", cache_key(self.type_name, file_identity(paths)), ".arrow")
        if not path.exists():
            try:
                tables = [self.read(p) for p in paths]
                schema = tables[0].schema
                for p, t in zip(paths[1:], tables[1:], strict=True):
                    if t.schema.names != schema.names:
                        raise DataError(
                            f"{str(p)!r} has columns {t.schema.names}, but {str(paths[0])!r} has "
                            f"{schema.names}", hint="All files of one split must share columns",
                            code="data_schema_mismatch")
                write_ipc(path, schema, _unified(tables, schema))
            except (pa.ArrowInvalid, ValueError, OSError) as exc:
                raise DataError(f"cannot read {self.type_name} data: {exc}", code="data_unreadable",
                                hint=f"Check that the files are valid {self.suffix} files") from None
        return IpcTable(path)

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "files", split)

    def files(self) -> list[Path]:
        found = (resolve_paths(p, self.base_dir, f"dataset.files.{s}", suffix=self.suffix, remote=False)
                 for s, p in self.config.files.items())
        return sorted({path for paths in found for path in paths})

    def read(self, path: Path) -> pa.Table:
        raise NotImplementedError


def _unified(tables: list[pa.Table], schema: pa.Schema) -> Iterator[pa.Table]:
    for t in tables:
        yield t if t.schema.equals(schema) else t.select(schema.names).cast(schema)


class JsonlSource(_FileSource):
    Config = JsonlConfig
    suffix = ".jsonl"

    def read(self, path: Path) -> pa.Table:
        return pjson.read_json(path)


class JsonSource(_FileSource):
    Config = JsonConfig
    suffix = ".json"

    def read(self, path: Path) -> pa.Table:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ValueError(f"{str(path)!r} must hold an array of objects (or {{\"data\": [...]}})")
        return pa.Table.from_pylist(data)


class CsvSource(_FileSource):
    Config = CsvConfig
    suffix = ".csv"

    def read(self, path: Path) -> pa.Table:
        return pcsv.read_csv(path)
