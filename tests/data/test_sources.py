from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from envbuilder.errors import SpecError
from envbuilder.graders import Outcome
from envbuilder.threadloop import run_sync
from tests.conftest import DATA
from tests.data.helpers import make_env

ROWS = [{"question": f"q{i}", "answer": str(i), "tags": ["a", "b"][: i % 3]} for i in range(5)]


def write_rows(
    path: Path, rows: list[dict], columns: list[str] | None = None, indent: int | None = None
) -> None:
    """``rows`` in the format of ``path``'s suffix: JSON Lines, a JSON array (``indent``: over
    many lines), or CSV with a header of ``columns`` (default: the first row's keys)."""
    kind = path.suffix[1:]
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "json":
        path.write_text(json.dumps(rows, indent=indent))
    else:
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, columns or list(rows[0]), extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


def test_parquet_gsm8k() -> None:
    env = make_env(
        {"type": "parquet", "files": {"train": "gsm8k/train-*.parquet"}}, {"train": {"type": "train"}}, DATA
    )
    train = env.split("train")
    assert len(train) == 7473
    first = train.task(0)
    assert first["id"] == "train-0" and first["question"].startswith("Natalia sold clips")


def test_huggingface_local_hub_folder(hub_gsm8k: Path) -> None:
    env = make_env(
        {"type": "huggingface", "path": str(hub_gsm8k), "config": "main"},
        {"train": {"type": "train"}, "test": {}},
        DATA,
    )
    assert {n: len(v) for n, v in env.splits.items()} == {"train": 7473, "test": 1319}
    assert [p.name for p in env.source.files()] == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
    ]
    assert env.split("test").task(-1)["id"] == "test-1318"


def test_huggingface_relative_path_and_data_files(hub_gsm8k: Path) -> None:
    env = make_env(
        {"type": "huggingface", "path": "hf/openai__gsm8k", "data_files": {"eval": "main/test-*.parquet"}},
        {"test": {"source": "eval"}},
        hub_gsm8k.parent.parent,
    )
    assert len(env.split("test")) == 1319


def test_huggingface_unknown_config_names_the_key(hub_gsm8k: Path) -> None:
    with pytest.raises(SpecError) as exc:
        make_env({"type": "huggingface", "path": str(hub_gsm8k), "config": "mian"}, {"train": {}}, DATA)
    assert "spec.yaml:" in str(exc.value) and " dataset: cannot load dataset" in str(exc.value)
    assert "'main'" in str(exc.value)


def test_huggingface_not_cached_offline_says_what_to_do() -> None:
    with pytest.raises(SpecError) as exc:
        make_env({"type": "huggingface", "path": "nobody/no-such-dataset-xyz"}, {"train": {}}, DATA)
    text = str(exc.value)
    assert " dataset: " in text and "HF_HUB_OFFLINE=0" in text and "local folder" in text


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv"])
def test_text_formats(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"rows.{kind}"
    write_rows(path, ROWS, ["question", "answer"])
    env = make_env({"type": kind, "files": {"test": f"rows.{kind}"}}, {"test": {}}, tmp_path)
    split = env.split("test")
    assert len(split) == 5 and env.source.files() == [path]
    task = split.task(4)
    assert task["question"] == "q4" and str(task["answer"]) == "4"
    if kind != "csv":
        assert task["tags"] == ["a"]
    # a second open reads the cached Arrow rows
    again = make_env({"type": kind, "files": {"test": f"rows.{kind}"}}, {"test": {}}, tmp_path)
    assert again.split("test").task_range(0, 5) == split.task_range(0, 5)


@pytest.mark.parametrize("block", [None, 4096])  # the bad line in the first block, or further on
def test_bad_json_is_a_located_error(
    block: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.data import _files

    if block:
        monkeypatch.setattr(_files, "_BLOCK", block)
    good = [json.dumps({"question": f"q{i}", "answer": str(i)}) for i in range(500)]
    (tmp_path / "bad.jsonl").write_text("\n".join([*good[:300], "{not json", *good[300:]]) + "\n")
    with pytest.raises(SpecError) as exc:
        make_env({"type": "jsonl", "files": {"test": "bad.jsonl"}}, {"test": {}}, tmp_path)
    assert str(exc.value).startswith(
        "spec.yaml:5:11 dataset.files.test: bad.jsonl:301: not a JSON object (Expecting property name"
    ), str(exc.value)
    (tmp_path / "list.jsonl").write_text("\n".join([*good[:3], "[1, 2]"]) + "\n")
    with pytest.raises(SpecError) as exc:
        make_env({"type": "jsonl", "files": {"test": "list.jsonl"}}, {"test": {}}, tmp_path)
    assert "dataset.files.test: list.jsonl:4: not a JSON object" in str(exc.value)


@pytest.mark.parametrize("kind", ["jsonl", "json"])
@pytest.mark.parametrize("block", [None, 4096])  # the kinds met in one block, or a block apart
def test_a_field_of_mixed_kinds_is_read_as_the_file_has_it(
    kind: str, block: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`"answer": 7` in one row and `"answer": "seven"` in another (one table column holds one
    type): each row's value as text, a string as it is, anything else as its JSON text."""
    from envbuilder.data import _files

    if block:
        monkeypatch.setattr(_files, "_BLOCK", block)
        monkeypatch.setattr(_files, "_JSON_ROWS", 100)
    rows: list[dict] = [{"question": f"q{i}", "answer": i, "n": i} for i in range(400)]
    odd = {390: "seven", 391: 2.5, 392: True, 393: [1, "x"], 394: {"a": None}, 395: None, 396: "ünï"}
    for at, value in odd.items():
        rows[at]["answer"] = value
    path = tmp_path / f"rows.{kind}"
    write_rows(path, rows)
    split = make_env({"type": kind, "files": {"test": path.name}}, {"test": {}}, tmp_path).split("test")
    assert len(split) == 400
    answers = [t["answer"] for t in split.task_range(0, 400)]
    assert answers[:3] == ["0", "1", "2"] and answers[389] == "389"
    assert answers[390:397] == ["seven", "2.5", "true", '[1, "x"]', '{"a": null}', None, "ünï"]
    assert [t["n"] for t in split.task_range(0, 400)] == list(range(400))  # a uniform field keeps its type


def test_bad_path_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        make_env({"type": "parquet", "files": {"train": "nope/*.parquet"}}, {"train": {}}, tmp_path)
    assert str(exc.value).startswith("spec.yaml:5:12 dataset.files.train: no Parquet file")


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv"])
def test_text_formats_stream_in_blocks_without_reading_files_whole(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.data import _files

    monkeypatch.setattr(_files, "_BLOCK", 4096)  # many blocks from a small file
    monkeypatch.setattr(_files, "_JSON_ROWS", 100)

    def whole(*_: object) -> None:
        raise AssertionError("read the file whole")

    for source in (_files.JsonlSource, _files.JsonSource, _files.CsvSource):
        monkeypatch.setattr(source, "read", whole)
        monkeypatch.setattr(source, "read_all", whole)
    rows = [{"question": f"q{i}", "answer": i, "note": "x" * (i % 7)} for i in range(5000)]
    path = tmp_path / f"rows.{kind}"
    write_rows(path, rows, indent=1)
    split = make_env({"type": kind, "files": {"test": f"rows.{kind}"}}, {"test": {}}, tmp_path).split("test")
    assert len(split) == 5000
    assert [(t["question"], int(t["answer"])) for t in split.task_range(4990, 5000)] == [
        (f"q{i}", i) for i in range(4990, 5000)
    ]


def test_a_later_block_with_other_keys_falls_back_to_reading_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.data import _files

    monkeypatch.setattr(_files, "_BLOCK", 4096)
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(2000)]
    rows[-1] = {"question": "last", "answer": "1.5", "extra": [1, 2]}  # a key the first block lacks
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    split = make_env({"type": "jsonl", "files": {"test": "rows.jsonl"}}, {"test": {}}, tmp_path).split("test")
    assert len(split) == 2000
    assert split.task(-1)["extra"] == [1, 2] and split.task(0)["extra"] is None


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv"])
# pyarrow reads a row of up to about two blocks: over two of its own 1 MB, over two streamed 4 MB.
@pytest.mark.parametrize("size", [3_000_000, 9_000_000])
def test_a_row_longer_than_a_block_is_read(kind: str, size: int, tmp_path: Path) -> None:
    """A long document, a repository's files: one row of megabytes among short ones, at the start
    (the block that fixes the columns), in the middle and at the end."""
    long = "ab " * (size // 3)
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(300)]
    for at in (0, 150, 299):
        rows[at] = {"question": long + str(at), "answer": str(at)}
    write_rows(tmp_path / f"rows.{kind}", rows)
    split = make_env({"type": kind, "files": {"test": f"rows.{kind}"}}, {"test": {}}, tmp_path).split("test")
    assert len(split) == 300
    for at in (0, 1, 150, 298, 299):
        task = split.task(at)
        assert task["question"] == (long + str(at) if at in (0, 150, 299) else f"q{at}")
        assert str(task["answer"]) == str(at)


def test_an_empty_file_gives_an_empty_split(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("question,answer\n")
    env = make_env({"type": "csv", "files": {"test": "rows.csv"}}, {"test": {}}, tmp_path)
    assert len(env.split("test")) == 0


def test_a_json_key_the_first_row_lacks_is_kept(tmp_path: Path) -> None:
    """A key that appears first in a later row of the first block is a column too (pyarrow alone
    types a block by its first row and dropped it)."""
    rows = [{"question": "q0", "answer": "0"}, {"question": "q1", "answer": "1", "note": "kept"}]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    split = make_env({"type": "json", "files": {"test": "rows.json"}}, {"test": {}}, tmp_path).split("test")
    assert split.task(1)["note"] == "kept" and split.task(0)["note"] is None


@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_a_column_null_in_one_file_takes_its_type_from_another(kind: str, tmp_path: Path) -> None:
    """The first file's `note` is all null (pyarrow types it `null`), the second's is text: the
    files' types are unified (casting the text to the first file's `null` type failed)."""
    files = {
        "a": [{"question": "q0", "answer": "0", "note": None}],
        "b": [{"question": "q1", "answer": "1", "note": "x"}],
    }
    for name, rows in files.items():
        write_rows(tmp_path / f"{name}.{kind}", rows)
    dataset = {"type": kind, "files": {"test": [f"a.{kind}", f"b.{kind}"]}}
    split = make_env(dataset, {"test": {}}, tmp_path).split("test")
    assert [split.task(0)["note"], split.task(1)["note"]] == [None, "x"]


BIG = 123456789012345678901234567890  # over 64 bits: pyarrow's text readers make it a float


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv"])
@pytest.mark.parametrize("block", [None, 4096])  # the large integer in the first block, or further on
def test_an_integer_over_64_bits_is_read_exactly_and_its_column_as_the_file_has_it(
    kind: str, block: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not 1.2345678901234568e+29, and not every other answer of its column as a float (`5.0`):
    a gold answer the right response would then miss."""
    from envbuilder.data import _files

    if block:
        monkeypatch.setattr(_files, "_BLOCK", block)
        monkeypatch.setattr(_files, "_JSON_ROWS", 100)
    rows: list[dict] = [
        {"question": f"q{i}", "answer": i, "score": i / 2, "big": 2**63 - 1, "real": 1e300}
        for i in range(400)
    ]
    rows[390]["answer"] = BIG
    rows[391]["answer"] = -BIG
    rows[392]["score"] = "9" * 5000 if kind == "csv" else 0.5  # more digits than int() reads
    path = tmp_path / f"rows.{kind}"
    write_rows(path, rows)
    env = make_env({"type": kind, "files": {"test": path.name}}, {"test": {}}, tmp_path)
    tasks = env.split("test").task_range(0, 400)
    assert [t["answer"] for t in tasks[388:392]] == ["388", "389", str(BIG), str(-BIG)]
    assert tasks[5]["answer"] == "5"
    if kind == "csv":  # its column is text too
        assert (tasks[392]["score"], tasks[5]["score"]) == ("9" * 5000, "2.5")
    # The other columns keep their types: a float, the largest 64-bit integer, a float past 2^63.
    assert (tasks[5]["big"], tasks[5]["real"]) == (2**63 - 1, 1e300)
    assert kind == "csv" or tasks[5]["score"] == 2.5
    assert env.submit is not None
    grade = run_sync(env.submit.grader.grade(str(BIG), tasks[390], {}))
    assert grade.outcome is Outcome.CORRECT


def test_an_integer_over_64_bits_inside_a_list_or_object_is_read_exactly(tmp_path: Path) -> None:
    rows = [
        {"question": "q0", "answer": "1", "steps": [1, 2], "meta": {"n": 3}},
        {"question": "q1", "answer": "2", "steps": [BIG, 2], "meta": {"n": BIG}},
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = make_env({"type": "jsonl", "files": {"test": "rows.jsonl"}}, {"test": {}}, tmp_path)
    tasks = env.split("test").task_range(0, 2)
    assert [t["steps"] for t in tasks] == ["[1, 2]", f"[{BIG}, 2]"]
    assert [t["meta"] for t in tasks] == ['{"n": 3}', f'{{"n": {BIG}}}']


@pytest.mark.parametrize("block", [None, 4096])  # read in blocks, or whole
def test_a_csv_header_that_repeats_a_name_is_an_error(
    block: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task holds one value per name: it would silently hold the last `answer`, not the first."""
    from envbuilder.data import _files

    if block:
        monkeypatch.setattr(_files, "_BLOCK", block)
    lines = [f"q{i},{i},{i + 1}\n" for i in range(2000)]
    (tmp_path / "rows.csv").write_text("question,answer,answer\n" + "".join(lines))
    with pytest.raises(SpecError) as exc:
        make_env({"type": "csv", "files": {"test": "rows.csv"}}, {"test": {}}, tmp_path)
    assert "dataset.files.test: " in str(exc.value)
    assert "rows.csv' has two columns named 'answer' (columns 2 and 3)" in str(exc.value)


@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_an_integer_of_more_digits_than_python_reads_is_its_text(kind: str, tmp_path: Path) -> None:
    huge = "9" * 5000  # Python's int() refuses over 4,300 digits
    lines = ['{"question": "q0", "answer": 5}', '{"question": "q1", "answer": ' + huge + "}"]
    text = "\n".join(lines) + "\n" if kind == "jsonl" else "[" + ",\n".join(lines) + "]"
    (tmp_path / f"rows.{kind}").write_text(text)
    env = make_env({"type": kind, "files": {"test": f"rows.{kind}"}}, {"test": {}}, tmp_path)
    assert [t["answer"] for t in env.split("test").task_range(0, 2)] == ["5", huge]


# Each column's values as a CSV writes them, and what a task holds: a number only when every
# value of the column is written exactly as that number is (Python's own text of it).
CSV_COLUMNS = {
    "zip": (["00501", "10001"], ["00501", "10001"]),
    "version": (["1.10", "2.0"], ["1.10", "2.0"]),
    "id": (["001", "002"], ["001", "002"]),
    "signed": (["+5", "6"], ["+5", "6"]),
    "sci": (["1e3", "2.5"], ["1e3", "2.5"]),
    "spaced": ([" 7", "8"], [" 7", "8"]),
    "mixed": (["5", "2.5"], ["5", "2.5"]),
    "zero": (["-0", "1"], ["-0", "1"]),
    "hex": (["0x10", "1"], ["0x10", "1"]),
    "flag": (["true", "false"], ["true", "false"]),
    "na": (["NA", "1"], ["NA", "1"]),
    "day": (["2024-01-05", "2024-01-06 10:00"], ["2024-01-05", "2024-01-06 10:00"]),
    "nan": (["nan", "1.5"], ["nan", "1.5"]),
    "int": (["5", "-3"], [5, -3]),
    "float": (["2.5", "5.0"], [2.5, 5.0]),
    "exp": (["1e+300", "1e-05"], [1e300, 1e-05]),
    "sparse": (["", "4"], [None, 4]),
}


@pytest.mark.parametrize("block", [None, 4096])  # the odd value in the first block, or further on
def test_csv_values_are_read_as_the_file_writes_them(
    block: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`00501` is not 501 nor `1.10` 1.1: a gold answer the right response would then miss."""
    from envbuilder.data import _files

    if block:
        monkeypatch.setattr(_files, "_BLOCK", block)
    n = 600
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(n)]
    for name, (written, _) in CSV_COLUMNS.items():
        for i, row in enumerate(rows):  # the first value in every row but the last
            row[name] = written[0] if i < n - 1 else written[1]
    if block:  # a plain number first; the odd value only in the last block
        for name, (written, _) in CSV_COLUMNS.items():
            for row in rows[:-1]:
                row[name] = written[1]
            rows[-1][name] = written[0]
    write_rows(tmp_path / "rows.csv", rows)
    split = make_env({"type": "csv", "files": {"test": "rows.csv"}}, {"test": {}}, tmp_path).split("test")
    first, last = split.task(0), split.task(n - 1)
    for name, (_, read) in CSV_COLUMNS.items():
        got = [first[name], last[name]]
        assert got == (read if not block else [read[1], read[0]]), name
    assert first["id"] == "001" or block


def test_a_csv_column_over_several_files_is_a_number_only_if_it_is_in_all(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("question,answer,n\nq0,5,1\nq1,6,2\n")
    (tmp_path / "b.csv").write_text("question,answer,n\nq2,2.5,003\nq3,7,4\n")
    dataset = {"type": "csv", "files": {"test": ["a.csv", "b.csv"]}}
    tasks = make_env(dataset, {"test": {}}, tmp_path).split("test").task_range(0, 4)
    assert [t["answer"] for t in tasks] == ["5", "6", "2.5", "7"]
    assert [t["n"] for t in tasks] == ["1", "2", "003", "4"]
    (tmp_path / "b.csv").write_text("question,answer,n\nq2,8,3\nq3,7,4\n")
    tasks = make_env(dataset, {"test": {}}, tmp_path).split("test").task_range(0, 4)
    assert [t["n"] for t in tasks] == [1, 2, 3, 4]
