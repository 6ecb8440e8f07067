"""`extends:`: deep-merged mappings, replaced lists and scalars, errors located per file, cycles."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuilder import paths
from envbuilder.environment import load_environment
from envbuilder.errors import SpecError
from envbuilder.spec import load_spec
from tests.conftest import ENVS

BASE = """\
name: base
tags: [a, b]
dataset:
  type: parquet
  files: {train: train.parquet, test: test.parquet}
splits:
  test: {type: test}
prompt:
  template: "{{ question }}"
  system: Be brief.
grader:
  type: exact_match
  target: "{{ answer }}"
  normalize: [strip, lower]
"""


def _write(tmp_path: Path, **files: str) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_child_overrides_merge_deeply_and_replace_lists(tmp_path: Path) -> None:
    child = "extends: base.yaml\nname: child\ntags: [c]\ngrader:\n  normalize: [strip]\n"
    child += "dataset:\n  files: {test: t2.parquet}\n"
    _write(tmp_path, **{"base.yaml": BASE, "child.yaml": child})
    spec = load_spec(tmp_path / "child.yaml").spec
    assert spec.name == "child" and spec.extends == "base.yaml"
    assert spec.tags == ["c"]
    assert spec.grader.normalize == ["strip"]  # list replaced
    assert spec.grader.target == "{{ answer }}"  # sibling kept
    assert spec.dataset.files == {"train": "train.parquet", "test": "t2.parquet"}
    assert spec.prompt.system == "Be brief."


def test_chains_resolve_relative_to_each_file(tmp_path: Path) -> None:
    _write(
        tmp_path,
        **{
            "bases/base.yaml": BASE,
            "bases/mid.yaml": "extends: base.yaml\ntitle: Mid\n",
            "child.yaml": "extends: bases/mid.yaml\nname: leaf\n",
        },
    )
    spec = load_spec(tmp_path / "child.yaml").spec
    assert (spec.name, spec.title, spec.grader.target) == ("leaf", "Mid", "{{ answer }}")


def test_errors_are_located_in_the_file_holding_the_key(tmp_path: Path) -> None:
    _write(
        tmp_path,
        **{
            "base.yaml": BASE.replace("{type: test}", "{type: tset}"),
            "child.yaml": "extends: base.yaml\nname: child\nsubmit:\n  max_attempts: 0\n",
        },
    )
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "child.yaml")
    where = [(p.file, p.line, p.col, p.loc) for p in info.value.problems]
    assert where == [
        (str(tmp_path / "base.yaml"), 7, 16, ("splits", "test", "type")),
        (str(tmp_path / "child.yaml"), 4, 17, ("submit", "max_attempts")),
    ]


def test_a_replaced_key_is_located_in_the_child(tmp_path: Path) -> None:
    child = "extends: base.yaml\nname: child\ngrader:\n  type: exact_match\n  target: 5\n"
    _write(tmp_path, **{"base.yaml": BASE, "child.yaml": child})
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "child.yaml")
    [problem] = info.value.problems
    assert (
        str(problem) == f"{tmp_path / 'child.yaml'}:5:11 grader.target: expected a string or a list (got 5)"
    )


def test_self_extension_is_a_cycle(tmp_path: Path) -> None:
    _write(tmp_path, **{"me.yaml": "extends: me.yaml\nname: me\n"})
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "me.yaml")
    [problem] = info.value.problems
    assert problem.code == "extends_cycle"
    assert problem.line == 1 and problem.loc == ("extends",)


def test_shipped_cot_variant_extends_gsm8k() -> None:
    base = load_spec(ENVS / "gsm8k.yaml").spec
    cot = load_spec(ENVS / "gsm8k_cot.yaml").spec
    assert cot.name == "gsm8k-cot" and cot.extends == "gsm8k.yaml"
    assert cot.prompt.template_file is None and "step by step" in (cot.prompt.template or "")
    assert (cot.dataset, cot.splits, cot.grader, cot.tests) == (
        base.dataset,
        base.splits,
        base.grader,
        base.tests,
    )


def test_a_base_in_another_folder_reads_its_data_and_templates_beside_it(tmp_path: Path) -> None:
    common = tmp_path / "common"
    (common / "data").mkdir(parents=True)
    shutil.copy(ENVS / "data" / "gsm8k" / "test-00000-of-00001.parquet", common / "data" / "test.parquet")
    (common / "prompt.jinja").write_text("Q: {{ question }}", encoding="utf-8")
    base = BASE.replace("{train: train.parquet, test: test.parquet}", "{test: data/test.parquet}")
    base = base.replace('  template: "{{ question }}"\n', "  template_file: prompt.jinja\n")
    child = "extends: ../common/base.yaml\nname: c\n"
    _write(tmp_path, **{"common/base.yaml": base, "mine/child.yaml": child})
    env = load_environment(tmp_path / "mine" / "child.yaml")
    assert env.spec.dataset.files == {"test": "../common/data/test.parquet"}
    task = env.split("test").task(0)
    assert env.prompt(task)[-1].text == f"Q: {task['question']}"


def test_a_served_spec_cannot_extend_a_base_outside_its_folder(tmp_path: Path) -> None:
    secret = "SECRET-LINE-OF-A-FILE: [unbalanced"
    _write(tmp_path, **{"outside/base.yaml": secret, "mine/child.yaml": "extends: ../outside/base.yaml\n"})
    with paths.contained([]), pytest.raises(SpecError) as info:
        load_spec(tmp_path / "mine" / "child.yaml")
    [problem] = info.value.problems
    assert problem.code == "extends_outside" and "SECRET" not in str(info.value)
    assert "/outside/base.yaml' is outside the spec's folder" in str(info.value)
    with paths.contained([tmp_path / "outside"]), pytest.raises(SpecError) as allowed:
        load_spec(tmp_path / "mine" / "child.yaml")  # allowed: read (and its YAML error shown)
    assert allowed.value.problems[0].code != "extends_outside"
