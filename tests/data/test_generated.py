"""Generated sources (`type: generator`): rows from (config, seed, index), levels, huge splits."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from envbuilder.data._arithmetic import arithmetic
from envbuilder.errors import SpecError
from tests.data.helpers import make_env

GEN = {
    "type": "generator",
    "generator": "arithmetic",
    "num_tasks": 10**9,
    "seed": 3,
    "levels": {"easy": {"digits": 1, "max_terms": 2}, "hard": {"digits": 4, "min_terms": 4, "max_terms": 5}},
}


def _env(tmp_path: Path, dataset: dict | None = None, splits: dict | None = None):
    return make_env(dataset or GEN, splits or {"easy": {}, "hard": {"type": "train"}}, tmp_path)


def test_rows_follow_the_level_config_and_carry_their_difficulty(tmp_path: Path) -> None:
    env = _env(tmp_path)
    easy, hard = env.split("easy").task(5), env.split("hard").task(5)
    assert easy["difficulty"] == "easy" and hard["difficulty"] == "hard"
    assert easy["terms"] <= 2 and 4 <= hard["terms"] <= 5
    assert all(len(n) == 4 for n in hard["question"][len("What is ") : -1].split()[::2])
    assert easy["id"] == "easy-5" and hard["id"] == "hard-5"
    # The row is the generator's output for the level's config, seed and index.
    seed = env.source.split_seed("easy")
    assert {k: easy[k] for k in ("question", "answer", "terms")} == arithmetic(
        {"digits": 1, "max_terms": 2}, seed, 5
    )


def test_the_same_index_is_the_same_task_in_a_new_environment(tmp_path: Path) -> None:
    first = _env(tmp_path)
    again = _env(tmp_path)
    picks = [0, 1, 7, 123_456, 10**9 - 1]
    assert [first.split("hard").task(i) for i in picks] == [again.split("hard").task(i) for i in picks]
    # Levels are seeded apart: the same index is another task.
    assert first.split("easy").task(7)["question"] != first.split("hard").task(7)["question"]


def test_a_billion_tasks_open_at_once_in_constant_memory(tmp_path: Path) -> None:
    # Start-up time is measured by bench/generators.py; here: a task makes its one row, no other.
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    made: list[int] = []
    env = _env(tmp_path, {**GEN, "num_tasks": 10**12})
    table = env.split("easy").table
    make = table.make  # type: ignore[attr-defined]
    table.make = lambda i: made.append(i) or make(i)  # type: ignore[attr-defined]
    assert len(env.split("easy")) == 10**12
    assert env.split("easy").task(-1)["id"] == f"easy-{10**12 - 1}"
    assert made == [10**12 - 1]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB


def test_task_range_pages_slices_and_shuffles_work_as_for_files(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        splits={
            "test": {"source": "easy", "slice": "[:100]"},
            "train": {"type": "train", "source": "easy", "slice": "[100:]", "shuffle": True, "seed": 1},
        },
    )
    test, train = env.split("test"), env.split("train")
    assert len(test) == 100 and len(train) == 10**9 - 100
    page = test.task_range(10, 20)
    assert [t["id"] for t in page] == [f"easy-{i}" for i in range(10, 20)]
    assert page == [test.task(i) for i in range(10, 20)]
    shuffled = train.task_range(0, 50)
    rows = [int(t["id"].split("-")[1]) for t in shuffled]
    assert all(r >= 100 for r in rows) and rows != sorted(rows)
    assert shuffled == [train.task(i) for i in range(50)]


def test_without_levels_the_splits_are_train_validation_test_seeded_apart(tmp_path: Path) -> None:
    dataset = {"type": "generator", "generator": "arithmetic", "num_tasks": 50}
    env = _env(tmp_path, dataset, {"train": {"type": "train"}, "test": {}})
    assert env.source.split_names() == ["train", "validation", "test"]
    train, test = env.split("train").task_range(0, 50), env.split("test").task_range(0, 50)
    assert {t["difficulty"] for t in train + test} == {"default"}
    assert [t["question"] for t in train] != [t["question"] for t in test]


def test_a_filter_on_difficulty(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        {**GEN, "num_tasks": 2000},
        {"few_terms": {"source": "hard", "filter": "terms == 4"}},
    )
    tasks = env.split("few_terms").task_range(0, 5000)
    assert 0 < len(tasks) < 2000 and all(t["terms"] == 4 for t in tasks)


def test_a_filter_over_a_huge_generated_table_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        _env(tmp_path, splits={"easy": {"filter": "terms == 2"}})
    (problem,) = info.value.problems
    assert problem.code == "filter_too_large"
    assert "1,000,000,000 rows" in problem.message and "num_tasks" in (problem.hint or "")


def test_an_unknown_generator_names_the_close_one(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        _env(tmp_path, {**GEN, "generator": "arithmetc"})
    assert [(p.code, p.hint) for p in info.value.problems] == [
        ("unknown_generator", "Did you mean 'arithmetic'?")
    ] * 1


def test_a_generator_refusing_its_config_is_a_located_data_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        _env(tmp_path, {**GEN, "levels": {"easy": {"digit": 2}}}, {"easy": {}})
    (problem,) = info.value.problems
    assert problem.code == "generator_failed"
    assert problem.loc == ("dataset", "levels", "easy")
    assert "unknown config key 'digit'" in problem.message


def test_the_level_a_split_names_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        _env(tmp_path, splits={"test": {"source": "medium"}})
    (problem,) = info.value.problems
    assert problem.code == "unknown_split" and "easy, hard" in (problem.hint or "")


@pytest.mark.parametrize("ops", ["+", "+-*", "*"])
def test_arithmetic_answers_are_right(ops: str) -> None:
    for i in range(200):
        row = arithmetic({"ops": ops, "min_terms": 1, "max_terms": 5}, 11, i)
        expression = row["question"][len("What is ") : -1]
        assert int(row["answer"]) == eval(expression)  # the test's oracle: Python's own precedence


def test_a_task_sent_back_is_found_in_a_sliced_split(tmp_path: Path) -> None:
    env = _env(tmp_path, splits={"train": {"type": "train", "source": "easy", "slice": "[100:]"}})
    task = env.split("train").task(5)
    assert task["id"] == "easy-105"
    assert env.find_task("easy-105") == task
    assert env.find_task("easy-99") is None  # not in the split
    assert env.find_task("hard-105") is None


def test_position_of_a_row_in_plain_index_maps() -> None:
    from envbuilder.data._maps import Identity, Permutation, Window, position

    assert position(Identity(10), 3) == 3 and position(Identity(10), 10) is None
    assert position(Window(Window(Identity(100), 10, 90), 5, 20), 17) == 2
    assert position(Window(Identity(100), 10, 90), 5) is None
    assert position(Permutation(Identity(10), 1), 3) is None
