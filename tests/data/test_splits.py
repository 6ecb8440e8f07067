from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.errors import SpecError
from tests.data.helpers import make_env

N = 100


@pytest.fixture
def data(tmp_path: Path) -> Path:
    table = pa.table(
        {
            "question": [f"q{i}" for i in range(N)],
            "answer": [str(i) for i in range(N)],
            "level": [i % 5 for i in range(N)],
        }
    )
    pq.write_table(table, tmp_path / "train.parquet", row_group_size=16)
    return tmp_path


def env(data: Path, splits: dict, **kw):  # type: ignore[no-untyped-def]
    return make_env({"type": "parquet", "files": {"train": "train.parquet"}}, splits, data, **kw)


def answers(view) -> list[int]:  # type: ignore[no-untyped-def]
    return [int(t["answer"]) for t in view.task_range(None, None)]


def test_slices_in_rows_and_percent(data: Path) -> None:
    e = env(
        data,
        {
            "head": {"source": "train", "slice": "[:10]"},
            "mid": {"source": "train", "slice": "[10%:20%]"},
            "tail": {"source": "train", "slice": "[-3:]"},
        },
    )
    assert answers(e.split("head")) == list(range(10))
    assert answers(e.split("mid")) == list(range(10, 20))
    assert answers(e.split("tail")) == [97, 98, 99]
    assert e.split("mid").task(0)["id"] == "train-10"  # ids name the source row


def test_filter_then_slice_then_limit(data: Path) -> None:
    e = env(data, {"hard": {"source": "train", "filter": "level >= 3", "slice": "[2:]", "limit": 4}})
    assert answers(e.split("hard")) == [8, 9, 13, 14]
    assert [t["id"] for t in e.split("hard").task_range(0, 2)] == ["train-8", "train-9"]


def test_filter_is_cached_and_invalidated(data: Path, cache_dir: Path) -> None:
    spec = {"easy": {"source": "train", "filter": "level == 0"}}
    assert answers(env(data, spec).split("easy")) == list(range(0, N, 5))
    cached = list((cache_dir / "filters").iterdir())
    assert len(cached) == 1
    env(data, spec)
    assert list((cache_dir / "filters").iterdir()) == cached  # reused, not recomputed
    pq.write_table(pa.table({"question": ["x"], "answer": ["0"], "level": [0]}), data / "train.parquet")
    os.utime(data / "train.parquet", ns=(1, 1))
    assert answers(env(data, spec).split("easy")) == [0]  # the data changed: a new key
    assert len(list((cache_dir / "filters").iterdir())) == 2


def test_seeded_shuffle_is_a_deterministic_permutation(data: Path) -> None:
    a = answers(env(data, {"train": {"shuffle": True, "seed": 1}}).split("train"))
    b = answers(env(data, {"train": {"shuffle": True, "seed": 1}}).split("train"))
    c = answers(env(data, {"train": {"shuffle": True, "seed": 2}}).split("train"))
    assert a == b and a != c and a != list(range(N)) and sorted(a) == list(range(N))
    limited = answers(env(data, {"train": {"shuffle": True, "seed": 1, "limit": 5}}).split("train"))
    assert limited == a[:5]


def test_carved_splits_are_disjoint_and_seeded(data: Path) -> None:
    splits = {
        "train": {"type": "train"},
        "validation": {"type": "validation", "carve_from": "train", "fraction": 0.1, "seed": 7},
        "dev": {"type": "validation", "carve_from": "train", "fraction": 0.2, "seed": 7},
    }
    e = env(data, splits)
    train, val, dev = (answers(e.split(n)) for n in ("train", "validation", "dev"))
    assert (len(train), len(val), len(dev)) == (70, 10, 20)
    assert sorted(train + val + dev) == list(range(N))
    assert train == sorted(train) and val == sorted(val)
    assert answers(env(data, splits).split("validation")) == val
    assert [s.model_dump() for s in e.list_splits()] == [
        {"name": "train", "type": "train"},
        {"name": "validation", "type": "validation"},
        {"name": "dev", "type": "validation"},
    ]


def test_custom_split_names_with_types(data: Path) -> None:
    e = env(
        data,
        {
            "easy": {"type": "train", "source": "train", "filter": "level < 2"},
            "hard": {"type": "test", "source": "train", "filter": "level >= 2"},
        },
    )
    assert (len(e.split("easy")), len(e.split("hard"))) == (40, 60)


def test_task_shape_include_exclude_rename_and_id(data: Path) -> None:
    e = env(
        data,
        {"train": {}},
        task={"id": "question", "exclude": ["level"], "rename": {"answer": "gold"}},
        target="{{ gold }}",
    )
    assert e.split("train").task(3) == {"id": "q3", "question": "q3", "gold": "3"}


@pytest.mark.parametrize(
    ("splits", "task", "expected"),
    [
        (
            {"train": {"source": "tran"}},
            None,
            "spec.yaml:8:13 splits.train.source: the dataset has no split 'tran'. Its splits are: train",
        ),
        (
            {"train": {"slice": "[a:b]"}},
            None,
            "spec.yaml:8:12 splits.train.slice: expected `[start:stop]` in rows or percent, e.g. "
            "`[:1000]` or `[10%:20%]` (got '[a:b]')",
        ),
        (
            {"train": {"filter": "levle > 1"}},
            None,
            "spec.yaml:8:13 splits.train.filter: the filter uses 'levle', which the rows lack "
            "Did you mean 'level'?",
        ),
        (
            {"train": {"filter": "grade > 1"}},
            None,
            "spec.yaml:8:13 splits.train.filter: the filter uses 'grade', which the rows lack. "
            "Row columns: question, answer, level",
        ),
        (
            {"train": {"filter": "level >"}},
            None,
            "spec.yaml:8:13 splits.train.filter: filter syntax error: unexpected 'end of template'",
        ),
        (
            {"train": {}, "val": {"carve_from": "trian", "fraction": 0.5}},
            None,
            "spec.yaml:9:17 splits.val.carve_from: no split 'trian' to carve from. Name one of: train",
        ),
        (
            {"train": {}},
            {"include": ["question", "answr"]},
            "spec.yaml:11:5 task.include[1]: split 'train' has no column 'answr' Did you mean 'answer'?",
        ),
        (
            {"train": {}},
            {"id": "uid"},
            "spec.yaml:9:7 task.id: split 'train' has no column 'uid'. "
            "Its columns are: question, answer, level",
        ),
    ],
)
def test_errors_name_the_spec_key(data: Path, splits: dict, task: dict | None, expected: str) -> None:
    with pytest.raises(SpecError) as exc:
        env(data, splits, task=task)
    assert str(exc.value) == expected


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (
            {"rename": {"question": "answer"}},
            [
                "spec.yaml:10:15 task.rename.question: renaming 'question' to 'answer' hides the column"
                " 'answer' that split 'train' already has. Rename it to a name no column has, rename"
                " 'answer' as well, or drop 'answer' with `exclude: [answer]`"
            ],
        ),
        (
            {"include": ["level", "question", "answer"], "rename": {"question": "level"}},
            ["task.rename.question: renaming 'question' to 'level' hides the column 'level' that"],
        ),
        (
            {"rename": {"question": "text", "answer": "text"}},
            [
                "task.rename.question: renaming 'question' to 'text' clashes with 'answer', renamed"
                " to 'text' too. Give each column a name of its own",
                "task.rename.answer: renaming 'answer' to 'text' clashes with 'question', renamed"
                " to 'text' too. Give each column a name of its own",
            ],
        ),
    ],
)
def test_a_rename_onto_a_name_another_column_has_is_an_error(
    data: Path, task: dict, expected: list[str]
) -> None:
    """A task holds one value per name: the other column would be silently lost."""
    with pytest.raises(SpecError) as exc:
        env(data, {"train": {}}, task=task, template="{{ level }}", target="{{ level }}")
    problems = [str(p).split("\n")[0] for p in exc.value.problems]
    assert len(problems) == len(expected)
    for problem, text in zip(problems, expected, strict=True):
        assert text in problem, problem
    assert {p.code for p in exc.value.problems} == {"rename_clash"}


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ({"rename": {"question": "answer", "answer": "question"}}, {"answer": "q3", "question": "3"}),
        ({"rename": {"question": "answer"}, "exclude": ["answer"]}, {"answer": "q3"}),
        ({"rename": {"question": "answer"}, "include": ["question", "level"]}, {"answer": "q3"}),
        ({"rename": {"question": "question"}}, {"question": "q3", "answer": "3"}),
    ],
)
def test_a_rename_onto_a_name_no_kept_column_keeps_is_fine(data: Path, task: dict, expected: dict) -> None:
    task3 = env(data, {"train": {}}, task=task, template="{{ level }}", target="x").split("train").task(3)
    assert {k: v for k, v in task3.items() if k in expected} == expected


def test_out_of_range_index_is_a_400(data: Path) -> None:
    from fastapi.testclient import TestClient

    from envbuilder.server import ServerSettings, create_app

    app = create_app([env(data, {"train": {"slice": "[:5]"}})], ServerSettings())
    with TestClient(app) as client:
        ok = client.post("/t/task", json={"split": "train", "index": -1})
        assert ok.status_code == 200 and ok.json()["task"]["id"] == "train-4"
        bad = client.post("/t/task", json={"split": "train", "index": 5})
        assert bad.status_code == 400 and bad.json() == {"detail": "Invalid index"}
        bad = client.post("/t/num_tasks", json={"split": "nope"})
        assert bad.status_code == 400 and bad.json() == {"detail": "Invalid split"}


def test_split_from_files_in_the_dataset_format(data: Path) -> None:
    extra = pa.table({"question": ["x", "y"], "answer": ["1", "2"], "level": [0, 1]})
    pq.write_table(extra, data / "extra.parquet")
    e = env(data, {"train": {}, "extra": {"files": "extra.parquet"}})
    assert e.split("extra").task_range(None, None) == [
        {"id": "extra-0", "question": "x", "answer": "1", "level": 0},
        {"id": "extra-1", "question": "y", "answer": "2", "level": 1},
    ]
    with pytest.raises(SpecError) as exc:
        env(data, {"train": {}, "extra": {"files": "missing.parquet"}})
    assert str(exc.value).startswith(
        "spec.yaml:9:12 splits.extra.files: no Parquet file at 'missing.parquet'"
    )
