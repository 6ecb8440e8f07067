"""`envbuilder check`: gold answers earn full reward; a spec's `tests:` get their rewards."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS

runner = CliRunner()
DATA = Path(__file__).parent / "invalid" / "data" / "tiny.parquet"

SPEC = """\
name: tiny
dataset:
  type: parquet
  files: {test: tiny.parquet}
splits:
  test: {type: test}
prompt:
  template: "{{ question }}"
grader:
  type: exact_match
  target: "{{ answer.split('####')[-1] }}"
"""


CIRCULAR = (
    "{spec}: note: the gold check is circular: with no `gold:` in the spec, each task's own "
    "grading target was submitted, which shows only that the target survives the grader's "
    'extraction. Add `gold:` (e.g. `gold: "{{{{ solution }}}}"`) for a check that means something'
)


def _spec(tmp_path: Path, text: str) -> str:
    shutil.copy(DATA, tmp_path / "tiny.parquet")
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    return str(tmp_path / "tiny.yaml")


def test_clean_spec_passes(tmp_path: Path) -> None:
    text = SPEC + "  extract: number\ntests:\n  - {response: 'It is 5.', reward: 1}\n"
    text += "  - {response: '?', reward: null}\n"
    spec = _spec(tmp_path, text)
    result = runner.invoke(app, ["check", spec])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 2)\n"
        f"{CIRCULAR.format(spec=spec)}\n{spec}: tests: 2/2 pass\n",
    )


def test_a_gold_template_makes_the_gold_check_mean_something(tmp_path: Path) -> None:
    # The whole worked answer ("2 + 3 = 5\n#### 5") goes through extraction, not the bare target.
    spec = _spec(tmp_path, SPEC + "  extract: number\ngold: '{{ answer }}'\n")
    result = runner.invoke(app, ["check", spec])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 2)\n",
    )


def test_a_gold_template_the_grader_cannot_read_fails(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC + "  extract: number\ngold: 'see the question'\n")
    result = runner.invoke(app, ["check", spec])
    assert result.exit_code == 1
    assert result.output.startswith(
        f"{spec}: gold answers: 0/2 get full reward (--sample 50 per split: test 2 of 2)\n\n2 failures\n"
    )


def test_null_and_empty_targets_are_named_with_their_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    answers = ["#### 5", None, "   ", "#### 7", None]
    table = pa.table({"question": [f"q{i}" for i in range(5)], "answer": answers})
    pq.write_table(table, tmp_path / "tiny.parquet")
    text = SPEC.replace("answer.split('####')[-1]", "answer") + "  extract: number\ngold: '{{ answer }}'\n"
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    spec = str(tmp_path / "tiny.yaml")
    result = runner.invoke(app, ["check", spec])
    assert result.exit_code == 1
    assert result.output == (
        f"{spec}: 3 of 5 test tasks have no target (the task has no target: its field `answer` is "
        "null): test[1], test[2], test[4]. Their answers would be ungradeable; fix or filter those rows\n"
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 5)\n"
    )


def test_gold_answers_the_extractor_cannot_read_fail_with_a_table(tmp_path: Path) -> None:
    # The target is a bare number, but the extractor wants "ANSWER: <n>": a real authoring bug.
    text = SPEC + "  extract: {pattern: 'ANSWER: (\\d+)', group: 1}\n"
    text += "tests:\n  - {response: 'ANSWER: 6', reward: 1, index: 1}\n"
    spec = _spec(tmp_path, text)
    result = runner.invoke(app, ["check", spec, "--sample", "5"])
    assert result.exit_code == 1
    assert result.output == (
        f"{spec}: gold answers: 0/2 get full reward (--sample 5 per split: test 2 of 2)\n"
        f"{CIRCULAR.format(spec=spec)}\n"
        f"{spec}: tests: 1/1 pass\n"
        "\n"
        "2 failures\n"
        "case  task     response  expected  got                 reason\n"
        "gold  test[0]  '5'       1         none (ungradeable)  "
        "no answer could be extracted from the response\n"
        "gold  test[1]  '6'       1         none (ungradeable)  "
        "no answer could be extracted from the response\n"
    )


def test_failing_spec_test(tmp_path: Path) -> None:
    text = SPEC + "  extract: number\ntests:\n  - {response: 'I think 4', reward: 1}\n"
    spec = _spec(tmp_path, text)
    result = runner.invoke(app, ["check", spec, "--sample", "0"])
    assert result.exit_code == 1
    assert result.output == (
        f"{spec}: tests: 0/1 pass\n"
        "\n"
        "1 failure\n"
        "case      task     response     expected  got  reason\n"
        "tests[0]  test[0]  'I think 4'  1         0    the answer does not match\n"
    )


def test_invalid_spec_is_not_checked(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC.replace("exact_match", "exact_mach"))
    result = runner.invoke(app, ["check", spec])
    assert result.exit_code == 1
    assert result.output.endswith(f"{spec}: invalid, nothing checked (see `envbuilder validate`)\n")


def test_the_authoring_guides_check_output_is_the_cli_output(monkeypatch) -> None:
    root = Path(__file__).parent.parent.parent
    monkeypatch.chdir(root)
    result = runner.invoke(app, ["check", "envs/gsm8k.yaml", "--sample", "50"])
    assert result.exit_code == 0
    assert result.output in (root / "docs" / "how-to" / "authoring.md").read_text(encoding="utf-8")


def test_unit_tests_gold_is_not_called_circular() -> None:
    # HumanEval's gold answers are its reference solutions, run against the tests: a real check.
    spec = str(ENVS / "humaneval.yaml")
    result = runner.invoke(app, ["check", spec, "--sample", "2"])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: 2/2 get full reward (--sample 2 per split: test 2 of 164)\n"
        f"{spec}: tests: 11/11 pass\n",
    )
