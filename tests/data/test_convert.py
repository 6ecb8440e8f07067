from __future__ import annotations

import base64
import datetime as dt
import decimal
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from envbuilder.data._parquet import ParquetTable
from envbuilder.data._splits import SplitView, TaskShaper
from tests.conftest import DATA
from tests.data.helpers import make_env


def view(table: pa.Table, tmp_path: Path) -> SplitView:
    pq.write_table(table, tmp_path / "t.parquet")
    t = ParquetTable([tmp_path / "t.parquet"])
    return SplitView("test", "test", t, TaskShaper("test", columns=t.columns))


def test_every_arrow_type_becomes_faithful_json(tmp_path: Path) -> None:
    table = pa.table(
        {
            "d": pa.array([dt.date(2024, 2, 29)]),
            "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC")),
            "dec": pa.array([decimal.Decimal("3.14")], pa.decimal128(5, 2)),
            "bin": pa.array([b"\x00\xff"]),
            "nested": pa.array([[{"a": [1, 2], "b": None}]]),
            "nan": pa.array([float("nan")]),
            "big": pa.array([2**62]),
        }
    )
    task = view(table, tmp_path).task(0)
    assert task == {
        "id": "test-0",
        "d": "2024-02-29",
        "ts": "2024-01-02T03:04:05+00:00",
        "dec": "3.14",
        "bin": base64.b64encode(b"\x00\xff").decode(),
        "nested": [{"a": [1, 2], "b": None}],
        "nan": None,
        "big": 2**62,
    }
    orjson.dumps(task)


def test_digits_image_keeps_the_hf_image_struct() -> None:
    e = make_env({"type": "parquet", "files": {"test": "digits/test-*.parquet"}}, {"test": {}}, DATA)
    task = e.split("test").task(0)
    image = task["image"]
    assert set(image) == {"bytes", "path"}
    png = base64.b64decode(image["bytes"])
    assert png.startswith(b"\x89PNG") and image["bytes"] == task["image_base64"]
    assert task["id"] == 0 and isinstance(task["pixels_8x8"], list)


def test_mmlu_list_column() -> None:
    e = make_env(
        {"type": "parquet", "files": {"test": "mmlu_stem/test-*.parquet"}},
        {"test": {}},
        DATA,
        target="{{ answer }}",
    )
    task = e.split("test").task(0)
    assert isinstance(task["choices"], list) and len(task["choices"]) == 4
    assert isinstance(task["answer"], int)
