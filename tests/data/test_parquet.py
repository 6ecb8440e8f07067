from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.data._parquet import ParquetTable, resolve_paths
from envbuilder.errors import DataError


@pytest.fixture
def two_files(tmp_path: Path) -> list[Path]:
    paths = []
    for k in range(2):
        table = pa.table({"q": [f"q{k}-{i}" for i in range(10)], "a": list(range(10))})
        path = tmp_path / f"part-{k}.parquet"
        pq.write_table(table, path, row_group_size=3)
        paths.append(path)
    return paths


def test_length_from_metadata_and_rows_across_groups(two_files: list[Path]) -> None:
    t = ParquetTable(two_files)
    assert len(t) == 20 and t.columns == ["q", "a"]
    assert t.row(0) == {"q": "q0-0", "a": 0}
    assert t.row(19) == {"q": "q1-9", "a": 9}
    assert [r["q"] for r in t.rows(8, 12)] == ["q0-8", "q0-9", "q1-0", "q1-1"]


def test_reads_only_the_row_group_it_needs(two_files: list[Path]) -> None:
    t = ParquetTable(two_files)
    t.row(4)
    assert list(t._cache) == [1]


def test_globs_and_directories(two_files: list[Path], tmp_path: Path) -> None:
    assert resolve_paths("part-*.parquet", tmp_path, "k") == two_files
    assert resolve_paths(".", tmp_path, "k") == two_files
    with pytest.raises(DataError, match=r"no Parquet file at 'nope\.parquet'"):
        resolve_paths("nope.parquet", tmp_path, "dataset.files.train")
