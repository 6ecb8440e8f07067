"""Mixtures (`type: mixture`): files and generators dealt by weight, deterministic per index."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from envbuilder.data._mixture import BLOCK, shares
from envbuilder.errors import SpecError
from tests.data.helpers import make_env


def _jsonl(path: Path, n: int, column: str = "question") -> str:
    path.write_text("".join(json.dumps({column: f"q{i}", "answer": str(i)}) + "\n" for i in range(n)))
    return path.name


def _mixture(tmp_path: Path, n_file: int = 600, weights: list[float] | None = None, **extra) -> dict:
    return {
        "type": "mixture",
        "seed": 5,
        "sources": [
            {
                "name": "file",
                "dataset": {"type": "jsonl", "files": {"test": _jsonl(tmp_path / "a.jsonl", n_file)}},
            },
            {
                "name": "gen",
                "dataset": {
                    "type": "generator",
                    "generator": "arithmetic",
                    "num_tasks": 10**9,
                    "levels": {"easy": {"digits": 1}, "hard": {"digits": 3}},
                },
                "splits": {"test": "hard"},
            },
        ],
        "weights": weights or [0.3, 0.7],
        **extra,
    }


def test_sources_are_dealt_by_weight_and_recorded_in_each_task(tmp_path: Path) -> None:
    env = make_env(_mixture(tmp_path), {"test": {}}, tmp_path)
    view = env.split("test")
    # The file's 600 rows at 300 per block of 1000 last two blocks: the mixture ends at the
    # file's first slot of the third block.
    assert 2 * BLOCK <= len(view) < 3 * BLOCK
    tasks = view.task_range(0, len(view))
    counts = collections.Counter(t["source"] for t in tasks)
    assert counts == {"file": 600, "gen": len(view) - 600}
    assert collections.Counter(t["source"] for t in tasks[:BLOCK]) == {"file": 300, "gen": 700}
    assert sorted(t["question"] for t in tasks if t["source"] == "file") == sorted(
        f"q{i}" for i in range(600)
    )
    assert {t["difficulty"] for t in tasks if t["source"] == "gen"} == {"hard"}
    assert {t["difficulty"] for t in tasks if t["source"] == "file"} == {None}
    assert len({t["id"] for t in tasks}) == len(tasks)  # ids unique across sources
    assert tasks[:3] == [view.task(i) for i in range(3)]


def test_the_same_index_gives_the_same_task_in_a_new_environment(tmp_path: Path) -> None:
    a = make_env(_mixture(tmp_path), {"test": {}}, tmp_path).split("test")
    b = make_env(_mixture(tmp_path), {"test": {}}, tmp_path).split("test")
    assert [a.task(i) for i in (0, 9, 999, 1500)] == [b.task(i) for i in (0, 9, 999, 1500)]
    other_seed = make_env(_mixture(tmp_path, seed=6), {"test": {}}, tmp_path).split("test")
    assert [a.task(i)["source"] for i in range(40)] != [other_seed.task(i)["source"] for i in range(40)]


def test_generated_sources_only_never_end_and_a_filter_picks_a_level(tmp_path: Path) -> None:
    gen = {"type": "generator", "generator": "arithmetic", "num_tasks": 3000,
           "levels": {"easy": {"digits": 1}, "hard": {"digits": 3}}}  # fmt: skip
    dataset = {
        "type": "mixture",
        "sources": [
            {"name": "easy", "dataset": gen, "splits": {"mix": "easy"}},
            {"name": "hard", "dataset": gen, "splits": {"mix": "hard"}},
        ],
    }
    env = make_env(
        dataset, {"mix": {}, "only_hard": {"source": "mix", "filter": "difficulty == 'hard'"}}, tmp_path
    )
    assert len(env.split("mix")) == 6000
    hard = env.split("only_hard").task_range(0, 10_000)
    assert len(hard) == 3000 and {t["source"] for t in hard} == {"hard"}


def test_num_tasks_caps_a_mixture(tmp_path: Path) -> None:
    env = make_env(_mixture(tmp_path, num_tasks=10), {"test": {}}, tmp_path)
    assert len(env.split("test")) == 10


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ([1, 1, 1], [334, 333, 333]),
        ([0.3, 0.2, 0.5], [300, 200, 500]),
        ([1, 0], [1000, 0]),
        ([1e-9, 1], [1, 999]),
    ],
)
def test_shares_of_a_block(weights: list[float], expected: list[int]) -> None:
    assert shares(weights) == expected


def test_mixture_mistakes_are_located(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        make_env(_mixture(tmp_path, weights=[1, 2, 3]), {"test": {}}, tmp_path)
    assert [p.loc for p in info.value.problems] == [("dataset", "weights")]
    assert "one weight per source (2)" in info.value.problems[0].message
    bad = _mixture(tmp_path)
    bad["sources"][1]["splits"] = {"other": "hard"}
    with pytest.raises(SpecError) as info:
        make_env(bad, {"test": {}}, tmp_path)
    assert [p.code for p in info.value.problems] == ["mixture_no_split"]


def test_a_column_named_source_must_be_renamed(tmp_path: Path) -> None:
    dataset = _mixture(tmp_path)
    dataset["sources"][0]["dataset"]["files"]["test"] = _jsonl(tmp_path / "s.jsonl", 10, column="source")
    with pytest.raises(SpecError) as info:
        make_env(dataset, {"test": {}}, tmp_path, template="{{ answer }}")
    assert [p.code for p in info.value.problems] == ["mixture_column_taken"]
    dataset["sources"][0]["rename"] = {"source": "question"}
    env = make_env(dataset, {"test": {}}, tmp_path)
    assert env.split("test").task(0)["source"] in {"file", "gen"}


def test_a_source_rename_onto_a_column_it_has_is_an_error(tmp_path: Path) -> None:
    dataset = _mixture(tmp_path)
    dataset["sources"][0]["rename"] = {"question": "answer"}
    with pytest.raises(SpecError) as info:
        make_env(dataset, {"test": {}}, tmp_path)
    assert [p.code for p in info.value.problems] == ["rename_clash"]
    assert info.value.problems[0].message == (
        "sources[0].rename: renaming 'question' to 'answer' hides the column 'answer' that source"
        " 'file' already has"
    )
