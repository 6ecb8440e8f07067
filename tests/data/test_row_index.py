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


def test_workers_of_one_host_build_the_index_once(
    big: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    """While one worker holds the build lock (another process, here), a second waits for it
    and then reads the index that worker wrote instead of building its own."""
    import subprocess
    import sys
    import time

    from envbuilder.data._ipc import write_ipc
    from envbuilder.data._rowindex import write_row_index

    monkeypatch.setattr(ParquetTable, "INDEX_ABOVE_GROUP_ROWS", 100)
    path = ParquetTable([big], index=False).index_path
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from envbuilder.data._cache import build_lock\n"
            "with build_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(1.5)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    built: list[int] = []
    monkeypatch.setattr(
        "envbuilder.data._parquet.write_row_index", lambda *a: built.append(1) or write_row_index(*a)
    )
    t = ParquetTable([big])
    time.sleep(0.2)
    assert t.index_thread is not None and t.index_thread.is_alive()  # waiting for the lock
    # The holder "builds" it: the index of another ParquetTable, written to the same path.
    other = pq.read_table(big)
    write_ipc(path, other.schema, iter(other.to_batches(max_chunksize=256)))
    holder.communicate(timeout=10)
    assert t.wait_indexed(30)
    assert built == []  # read, not built again
    assert t.row(4999) == {"i": 4999, "s": "row 4999"}


def test_the_index_process_ends_with_the_server_that_started_it(big: Path, tmp_path: Path) -> None:
    """A row index process whose server has gone (its parent is no longer the pid it was given,
    as after the server was stopped or killed mid-build) stops and writes nothing; with its
    server there, it writes the index."""
    import subprocess
    import sys

    from envbuilder.data._ipc import IpcTable

    out = tmp_path / "index.arrow"
    gone = subprocess.run(
        [sys.executable, "-m", "envbuilder.data._rowindex", "1", str(out), str(big)],
        capture_output=True,
        text=True,
        timeout=60,
    )  # pid 1 is never this process's parent here: as if reparented after its server died
    assert gone.returncode == 1 and "has gone" in gone.stderr
    assert not out.exists() and list(tmp_path.glob("index.arrow*")) == []
    subprocess.run(
        [sys.executable, "-c", "import sys; from envbuilder.data._rowindex import write_row_index; "
         "from pathlib import Path; write_row_index(Path(sys.argv[1]), [Path(sys.argv[2])])",
         str(out), str(big)],
        check=True,
        timeout=60,
    )  # fmt: skip
    assert len(IpcTable(out)) == 5000
