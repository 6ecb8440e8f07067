from __future__ import annotations

import pytest

from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec

HEAD = """name: t
dataset: {type: parquet, files: {train: x.parquet}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
splits:
"""


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        (
            "a: {source: train, files: y.parquet}",
            "spec.yaml:6:6 splits.a: give at most one of `source` or `files`",
        ),
        ("a: {carve_from: train}", "spec.yaml:6:6 splits.a: `carve_from` and `fraction` go together"),
        (
            "a: {carve_from: train, fraction: 0.1, filter: 'x > 1'}",
            "spec.yaml:6:6 splits.a: a carved split takes its rows from `carve_from`; "
            "`filter` belongs on that split",
        ),
        (
            "a: {carve_from: train, fraction: 1.5}",
            "spec.yaml:6:36 splits.a.fraction: expected a number < 1.0 (got 1.5)",
        ),
        (
            "a: {slice: '[1:x]'}",
            "spec.yaml:6:14 splits.a.slice: expected `[start:stop]` in rows or percent, e.g. `[:1000]` or "
            "`[10%:20%]` (got '[1:x]')",
        ),
        ("a: {limit: -1}", "spec.yaml:6:14 splits.a.limit: expected a number >= 0 (got -1)"),
    ],
)
def test_split_key_errors(split: str, expected: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec(HEAD + "  " + split + "\n", file="spec.yaml")
    assert str(exc.value) == expected


def test_split_keys_accepted() -> None:
    spec = parse_spec(
        HEAD + "  a: {source: train, filter: 'level > 2', slice: '[10%:20%]', shuffle: true,"
        " seed: 3, limit: 5}\n  b: {carve_from: a, fraction: 0.5}\n",
        file="spec.yaml",
    ).spec
    assert spec.splits["a"].slice == "[10%:20%]" and spec.splits["b"].fraction == 0.5
