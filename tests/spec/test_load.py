from __future__ import annotations

from pathlib import Path

import pytest

from envbuilder.errors import SpecError
from envbuilder.spec import load_spec, parse_spec

GOOD = """\
name: demo
dataset:
  type: parquet
  files: {train: data.parquet}
splits:
  train: {type: train}
prompt:
  template: "{{ question }}"
grader:
  type: exact_match
  target: "{{ answer }}"
"""


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, file="x.yaml")
    return [str(p) for p in info.value.problems]


def test_good_spec_parses() -> None:
    loaded = parse_spec(GOOD, file="x.yaml")
    assert loaded.spec.name == "demo"
    assert loaded.spec.grader.type == "exact_match"


def test_unknown_grader_type_is_located_with_a_hint() -> None:
    text = GOOD.replace("type: exact_match", "type: exact_mach")
    assert _errors(text) == ["x.yaml:10:3 grader.type: unknown type 'exact_mach' Did you mean 'exact_match'?"]


def test_unknown_key_and_bad_value_reported_together() -> None:
    text = GOOD.replace("splits:\n  train: {type: train}", "splits:\n  train: {type: trian}")
    text = text.replace("prompt:\n", "prompt:\n  templat: x\n")
    assert _errors(text) == [
        "x.yaml:6:17 splits.train.type: expected one of 'train', 'validation', 'test' (got 'trian')"
        " Did you mean 'train'?",
        "x.yaml:8:3 prompt.templat: unknown key 'templat' Did you mean 'template'?",
    ]


def test_a_key_at_the_wrong_level_is_told_where_it_belongs() -> None:
    # Out of `grader:` (its required `target` then missing too), not a far spelling ('dataset').
    text = GOOD.replace('  target: "{{ answer }}"', 'target: "{{ answer }}"')
    assert _errors(text)[-1] == (
        "x.yaml:11:1 target: unknown key 'target'. `target` is a key of `grader` (indent it under grader)"
    )
    # A key of a block the spec lacks; one of the mapping beside it.
    text = GOOD.replace("grader:\n", "grader:\n  max_attempts: 2\n").replace(
        "prompt:\n", "prompt:\n  extract: number\n"
    )
    assert _errors(text) == [
        "x.yaml:8:3 prompt.extract: unknown key 'extract'. `extract` is a key of `grader` "
        "(move it under grader)",
        "x.yaml:11:3 grader.max_attempts: unknown key 'max_attempts'. `max_attempts` is a key of `submit` "
        "(move it under submit)",
    ]


def test_a_far_spelling_is_no_hint() -> None:
    # `outset` is as far from `dataset` (0.62) as `target` is: no typo of it.
    assert _errors(GOOD + "outset: 1\n") == ["x.yaml:12:1 outset: unknown key 'outset'"]
    assert _errors(GOOD + "datset: 1\n") == [
        "x.yaml:12:1 datset: unknown key 'datset' Did you mean 'dataset'?"
    ]


def test_unknown_key_inside_plugin_block() -> None:
    text = GOOD.replace("  files: {train: data.parquet}", "  file: {train: data.parquet}")
    # One mistake, one problem: not also "missing required key 'files'".
    assert _errors(text) == ["x.yaml:4:3 dataset.file: unknown key 'file' Did you mean 'files'?"]
    text = GOOD.replace("  files: {train: data.parquet}", "  paths: {train: data.parquet}")
    assert _errors(text) == [
        "x.yaml:3:3 dataset.files: missing required key 'files'. Source split name → a file, a glob,"
        " a directory of `.parquet` files, or a list of these; relative to the spec file; or the `s3://`,"
        " `gs://`, `https://` or `hf://` URL of one file (fetched once into the cache).",
        "x.yaml:4:3 dataset.paths: unknown key 'paths'",
    ]


def test_yaml_syntax_error_and_duplicates() -> None:
    assert _errors("name: [x\n")[0].startswith("x.yaml:2:1: invalid YAML")
    assert _errors(GOOD + "name: again\n") == [
        "x.yaml:12:1 name: duplicate key 'name'. Each key may appear once in a mapping; remove one of them"
    ]


def test_dates_stay_strings() -> None:
    loaded = parse_spec(GOOD + "version: 2024-01-01\n", file="x.yaml")
    assert loaded.spec.version == "2024-01-01"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "missing.yaml")


def test_a_duplicate_key_is_reported_with_the_other_problems() -> None:
    text = GOOD.replace("{train: data.parquet}", "{train: data.parquet, train: data.parquet}") + "bogus: 1\n"
    assert _errors(text) == [
        "x.yaml:4:32 dataset.files.train: duplicate key 'train'. Each key may appear once in a mapping; "
        "remove one of them",
        "x.yaml:12:1 bogus: unknown key 'bogus'",
    ]
