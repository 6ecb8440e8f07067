from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.data._parquet import ParquetTable


@pytest.fixture
def big(tmp_path: Path) -> Path:
    n = 5000
    pq.write_table(
        pa.table({"i": list(range(n)), "s": [f"row {i}" for i in range(n)]}),
        tmp_path / "big.parquet",
        row_group_size=700,
    )
    return tmp_path / "big.parquet"


def test_background_index_serves_the_same_rows_and_is_reused(
    big: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    monkeypatch.setattr(ParquetTable, "INDEX_ABOVE_GROUP_ROWS", 100)
    t = ParquetTable([big])
    before = [t.row(i) for i in (0, 699, 700, 4999)]
    assert t.wait_indexed(30)
    assert [t.row(i) for i in (0, 699, 700, 4999)] == before
    assert t.rows(695, 705) == [{"i": i, "s": f"row {i}"} for i in range(695, 705)]
    assert t.index_path.is_relative_to(cache_dir)
    again = ParquetTable([big])
    assert again.indexed and again.index_thread is None  # a later start reuses the index


def test_small_tables_need_no_index(big: Path) -> None:
    t = ParquetTable([big])
    assert t.index_thread is None and not t.indexed
