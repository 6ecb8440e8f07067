"""`envbuilder validate`: every invalid spec under invalid/ prints exactly its .expected file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.errors import format_loc

INVALID = Path(__file__).parent / "invalid"
CASES = sorted(INVALID.glob("*.yaml"))
runner = CliRunner()


def _validate(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", *args])
    return result.exit_code, result.output.replace(str(INVALID), "<here>")


@pytest.mark.parametrize("spec", CASES, ids=lambda p: p.stem)
def test_invalid_spec_output_is_exactly_as_expected(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(INVALID)
    code, output = _validate(spec.name)
    expected_file = spec.with_suffix(".expected")
    if os.environ.get("UPDATE_EXPECTED"):  # regenerate: UPDATE_EXPECTED=1 pytest tests/cli
        expected_file.write_text(output, encoding="utf-8")
    assert code == 1
    assert output == expected_file.read_text(encoding="utf-8")


def test_every_expected_file_has_its_spec() -> None:
    assert sorted(p.with_suffix(".yaml") for p in INVALID.glob("*.expected")) == CASES


def test_valid_specs_exit_0_and_all_specs_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).parent.parent.parent
    monkeypatch.chdir(root)
    code, output = _validate("envs/gsm8k.yaml")
    assert (code, output) == (0, "envs/gsm8k.yaml: valid (train 7,473 / test 1,319 tasks)\n")
    code, output = _validate("envs/gsm8k.yaml", "tests/cli/invalid/yaml_syntax.yaml")
    assert code == 1
    assert output.startswith("envs/gsm8k.yaml: valid")
    assert output.endswith("tests/cli/invalid/yaml_syntax.yaml: 1 problem\n")


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["validate"]).exit_code == 2
    assert runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")]).exit_code == 2


def test_seven_mistakes_of_seven_kinds_in_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuilder.authoring import validate_spec

    monkeypatch.chdir(INVALID)
    result = validate_spec("seven_mistakes.yaml")
    assert [(p.line, p.code) for p in result.problems] == [
        (9, "filter_unknown_column"),
        (10, "value_error"),
        (12, "unknown_column"),
        (13, "extra_forbidden"),
        (14, "template_error"),
        (16, "union_tag_invalid"),
        (21, "test_index"),
    ]
    assert result.skipped == ["grader", "splits.test.slice"]


def test_a_bad_list_entry_leaves_out_its_list_so_no_problem_is_misplaced(tmp_path: Path) -> None:
    from envbuilder.authoring import validate_spec

    spec = (INVALID / "seven_mistakes.yaml").read_text(encoding="utf-8")
    spec = spec.replace("../../fixtures", str(INVALID.parent.parent / "fixtures"))
    spec = spec.replace("  - response:", '  - {response: x, reward: "high"}\n  - response:')
    (tmp_path / "s.yaml").write_text(spec, encoding="utf-8")
    result = validate_spec(tmp_path / "s.yaml")
    assert [(p.line, format_loc(p.loc)) for p in result.problems][-2:] == [
        (16, "grader.type"),
        (19, "tests[0].reward"),
    ]
    assert "tests" in result.skipped
