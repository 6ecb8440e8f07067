"""Dataset files at URLs: fetched once by version, indexed like local files, shared by processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.data._remote import fetch, is_url
from envbuilder.environment import load_environment
from envbuilder.errors import DataError
from tests.stores import moto_s3, static_http

SPEC = """\
name: remote
dataset:
  type: parquet
  files:
    test: {url}
splits:
  test: {{type: test}}
prompt:
  template: "What is {{{{ n }}}} squared?"
grader:
  type: exact_match
  target: "{{{{ square }}}}"
"""


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with moto_s3("data") as env:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield env


def _put(tmp_path: Path, key: str, rows: int, **kwargs: int) -> str:
    import s3fs

    local = tmp_path / "upload.parquet"
    pq.write_table(
        pa.table({"n": list(range(rows)), "square": [str(i * i) for i in range(rows)]}), local, **kwargs
    )
    s3fs.S3FileSystem(skip_instance_cache=True).put_file(str(local), f"data/{key}")
    return f"s3://data/{key}"


def test_is_url() -> None:
    urls = ("s3://b/k", "gs://b/k", "https://h/x", "hf://datasets/a/b/x", "data/x", "C:/x")
    assert [is_url(u) for u in urls] == [True, True, True, True, False, False]


def test_a_spec_reads_a_parquet_on_s3_once_keyed_by_its_etag(s3: dict[str, str], tmp_path: Path) -> None:
    url = _put(tmp_path, "squares.parquet", 50)
    spec = tmp_path / "remote.yaml"
    spec.write_text(SPEC.format(url=url))
    env = load_environment(spec)
    assert env.split("test").task(7)["square"] == "49"
    first = fetch(url)
    stat = first.stat()
    assert fetch(url) == first and first.stat().st_mtime_ns == stat.st_mtime_ns  # not downloaded again
    assert env.source.files() == []  # not one of the spec's own files: packs carry the URL
    _put(tmp_path, "squares.parquet", 60)  # a new object: a new ETag, a new copy
    assert fetch(url) != first and len(load_environment(spec).split("test")) == 60


def test_a_missing_object_and_an_unreachable_store_are_clear_errors(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DataError, match=r"no file at 's3://data/nope.parquet'"):
        fetch("s3://data/nope.parquet")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(DataError, match=r"cannot reach 's3://data/other.parquet'.*Check AWS credentials"):
        fetch("s3://data/other.parquet")


def test_an_earlier_copy_serves_when_the_store_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with moto_s3("data") as env:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        url = _put(tmp_path, "squares.parquet", 5)
        copy = fetch(url)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert fetch(url) == copy


_CHILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s")
from envbuilder.data._parquet import ParquetTable
from envbuilder.data._remote import fetch
table = ParquetTable([fetch(sys.argv[1])])
assert table.wait_indexed(60), "no row index"
print("ROW", table.row(123_456)["square"])
"""


def test_processes_share_one_download_and_one_row_index(s3: dict[str, str], tmp_path: Path) -> None:
    url = _put(tmp_path, "big.parquet", 200_000, row_group_size=20_000)
    env = {**os.environ, **s3}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(f"ROW {123_456**2}" in out for out in outs)
    log = "".join(outs)
    assert log.count(f"fetching {url}") == 1, log
    assert log.count("row index of 200,000 rows built") == 1, log


def test_a_hub_source_takes_data_files_at_urls(s3: dict[str, str], tmp_path: Path) -> None:
    url = _put(tmp_path, "hub/squares.parquet", 30)
    spec = tmp_path / "hub.yaml"
    spec.write_text(
        SPEC.format(url="").replace(
            "  type: parquet\n  files:\n    test: \n",
            f"  type: huggingface\n  path: parquet\n  data_files: {{test: {url}}}\n",
        )
    )
    env = load_environment(spec)
    assert len(env.split("test")) == 30 and env.split("test").task(5)["square"] == "25"


def test_an_http_file_without_etag_is_keyed_by_its_content(tmp_path: Path) -> None:
    served = tmp_path / "www"
    served.mkdir()
    pq.write_table(pa.table({"n": [1, 2], "square": ["1", "4"]}), served / "s.parquet")
    with static_http(served) as base:
        first = fetch(f"{base}/s.parquet")
        assert fetch(f"{base}/s.parquet") == first  # downloaded again (no version), same content: same copy
        pq.write_table(pa.table({"n": [3], "square": ["9"]}), served / "s.parquet")
        assert fetch(f"{base}/s.parquet") != first
        spec = tmp_path / "http.yaml"
        spec.write_text(SPEC.format(url=f"{base}/s.parquet"))
        assert load_environment(spec).split("test").task(0)["square"] == "9"


def test_a_missing_driver_names_the_package_to_install() -> None:
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(
            DataError, match=r"reading 'gs://b/x.parquet' needs the 'gcsfs' package.*pip install gcsfs"
        ):
            fetch("gs://b/x.parquet")
    else:
        pytest.skip("gcsfs is installed")
