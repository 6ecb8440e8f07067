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
        f"{spec}:10:3 grader: 3 of 5 test tasks have no target (the task has no target: its field "
        "`answer` is null): test[1], test[2], test[4]. Their answers would be ungradeable; fix or "
        "filter those rows\n"
        "   10 |   type: exact_match\n"
        "      |   ^\n"
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 5)\n"
    )


def _rows(tmp_path: Path, **columns: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), tmp_path / "tiny.parquet")


def test_a_target_that_fails_to_render_on_some_rows_names_them_and_checks_the_rest(tmp_path: Path) -> None:
    # `answer.split` on a null answer: a render error on two rows of 30, not a stop.
    answers = [None if i in (7, 21) else f"w #### {i}" for i in range(30)]
    _rows(tmp_path, question=["q" + "x" * i for i in range(30)], answer=answers)
    text = SPEC + "  extract: number\ntests:\n  - {response: 'It is 0.', reward: 1}\n"
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    spec = str(tmp_path / "tiny.yaml")
    result = runner.invoke(app, ["check", spec, "--sample", "30"])
    assert result.exit_code == 1
    assert result.output == (
        f"{spec}:10:3 grader: 2 of 30 test tasks have a target that fails to render (grader.target[0]: "
        "'None' has no attribute 'split'. Available fields: answer, id, question): test[7], test[21]. "
        "Their answers would be ungradeable; fix or filter those rows\n"
        "   10 |   type: exact_match\n"
        "      |   ^\n"
        f"{spec}: gold answers: 28/28 get full reward (--sample 30 per split: test 28 of 30)\n"
        f"{CIRCULAR.format(spec=spec)}\n"
        f"{spec}: tests: 1/1 pass\n"
    )


def test_prompts_that_fail_to_render_are_named_first_rows_and_count(tmp_path: Path) -> None:
    # Validation renders a sample: rows past it whose prompt (here the system prompt, then the
    # template) fails would be refused when served.
    n = 40
    tags = [None if i >= 25 else ["a", "b"] for i in range(n)]
    questions = ["q" + "x" * i for i in range(n)]
    _rows(
        tmp_path,
        question=questions,
        answer=[f"#### {i}" for i in range(n)],
        tags=tags,
        row=[1000 + 7 * i for i in range(n)],
    )
    text = SPEC.replace(
        '  template: "{{ question }}"',
        '  system: "{{ question | upper }}{{ 1 // (row != 1231) }}"\n'
        "  template: \"({{ tags | join(', ') }}) {{ question }}\"",
    )
    text += "  extract: number\n"
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    spec = str(tmp_path / "tiny.yaml")
    result = runner.invoke(app, ["check", spec, "--sample", "2"])
    assert result.exit_code == 1
    assert result.output == (
        f"{spec}:9:13 prompt.template: 14 of 40 test tasks have a prompt that fails to render "
        "(prompt.template: TypeError: 'NoneType' object is not iterable): test[25], test[26], "
        "test[27], test[28], test[29], test[30], test[31], test[32], test[34], test[35] and 4 more. "
        "They could not be served; fix or filter those rows\n"
        "    9 |   template: \"({{ tags | join(', ') }}) {{ question }}\"\n"
        "      |             ^\n"
        f"{spec}:8:11 prompt.system: 1 of 40 test tasks have a prompt that fails to render "
        "(prompt.system: ZeroDivisionError: integer division or modulo by zero): test[33]. "
        "They could not be served; fix or filter those rows\n"
        '    8 |   system: "{{ question | upper }}{{ 1 // (row != 1231) }}"\n'
        "      |           ^\n"
        f"{spec}: gold answers: 2/2 get full reward (--sample 2 per split: test 2 of 40)\n"
        f"{CIRCULAR.format(spec=spec)}\n"
    )


REGEX = SPEC.replace(
    "  type: exact_match\n  target: \"{{ answer.split('####')[-1] }}\"\n",
    "  type: regex\n  pattern: '^\\s*{{ answer.split(\"####\")[-1] | trim }}\\s*$'\n",
)


def test_a_regex_pattern_is_never_submitted_as_the_gold_answer(tmp_path: Path) -> None:
    # The pattern is what answers must match, not an answer: without `gold:` there is nothing
    # to submit, and the check says so instead of failing.
    spec = _spec(
        tmp_path, REGEX + "tests:\n  - {response: ' 5 ', reward: 1}\n  - {response: '6', reward: 0}\n"
    )
    result = runner.invoke(app, ["check", spec])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: none checked (--sample 50 per split: test 2 of 2): the regex grader's "
        "target is no answer to submit (a pattern matches many): add `gold:` (e.g. "
        '`gold: "{{ answer }}"`) for check to submit one\n'
        f"{spec}: tests: 2/2 pass\n",
    )


def test_a_regex_grader_checks_the_gold_template(tmp_path: Path) -> None:
    spec = _spec(tmp_path, REGEX + "gold: \"{{ answer.split('####')[-1] }}\"\n")
    result = runner.invoke(app, ["check", spec])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 2)\n",
    )


def test_a_composite_submits_the_gold_of_a_child_that_knows_one(tmp_path: Path) -> None:
    # `all` of a pattern (no gold answer) and an exact match (its target): the target is
    # submitted and both graders grade it.
    text = REGEX.replace(
        "grader:\n  type: regex\n  pattern:",
        "grader:\n  type: all\n  graders:\n  - type: regex\n    pattern:",
    )
    text += "  - {type: exact_match, target: \"{{ answer.split('####')[-1] }}\", extract: number}\n"
    spec = _spec(tmp_path, text)
    result = runner.invoke(app, ["check", spec])
    assert (result.exit_code, result.output) == (
        0,
        f"{spec}: gold answers: 2/2 get full reward (--sample 50 per split: test 2 of 2)\n"
        f"{CIRCULAR.format(spec=spec)}\n",
    )


def test_a_gold_template_that_fails_on_one_task_fails_that_task_only(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC + "  extract: number\ngold: \"{{ 1 // (id != 'test-1') }}{{ answer }}\"\n")
    result = runner.invoke(app, ["check", spec])
    assert result.exit_code == 1
    assert result.output.startswith(
        f"{spec}: gold answers: 1/2 get full reward (--sample 50 per split: test 2 of 2)\n\n1 failure\n"
    )
    assert "gold: ZeroDivisionError" in result.output


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


def test_preview_names_the_task_whose_prompt_fails(tmp_path: Path) -> None:
    _rows(tmp_path, question=["a", "b"], answer=["#### 1", "#### 2"], tags=[["x"], None])
    text = SPEC.replace('"{{ question }}"', "\"({{ tags | join(', ') }}) {{ question }}\"")
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["preview", str(tmp_path / "tiny.yaml"), "-i", "1"])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: task test[1]: prompt.template: TypeError: 'NoneType' object is not iterable\n"
    )
