"""The gold-leak audit and the duplicate-id check of ``envbuilder validate``, on the shipped
specs as they were (each leak of issue 23) and as they are now."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.authoring._leaks import gold_leaks
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.conftest import ENVS

runner = CliRunner()
SHIPPED = sorted(ENVS.glob("*.yaml"))


def _spec(tmp_path: Path, shipped: str, data: Path, replace: list[tuple[str, str]]) -> str:
    """A copy of ``envs/<shipped>`` beside a copy of ``data``, with text replaced."""
    text = (ENVS / shipped).read_text(encoding="utf-8")
    text = re.sub(r"(?m)^(\s+test: )data/\S+$", r"\1test.parquet", text)
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    shutil.copy(data, tmp_path / "test.parquet")
    path = tmp_path / shipped
    path.write_text(text, encoding="utf-8")
    return str(path)


def _validate(spec: str) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", spec])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("spec", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_spec_leaks_nothing(spec: Path) -> None:
    env = load_environment(spec)
    assert gold_leaks(env) == []


def test_math500_solution_was_public(tmp_path: Path) -> None:
    # Before: only the grader's `answer` was private, so `/task` served the worked solution.
    data = ENVS / "data" / "math500" / "test-00000-of-00001.parquet"
    spec = _spec(tmp_path, "math500.yaml", data, [("grader:", "task: {private: [answer]}\n\ngrader:")])
    code, out = _validate(spec)
    assert code == 1
    assert re.search(
        r"field 'solution' contains the gold answer on 1[5-9]\d of 200 sampled test tasks", out
    ), out
    assert "Make the field private" in out
    # Now `gold: "{{ solution }}"` makes `solution` private by default.
    env = load_environment(_spec(tmp_path, "math500.yaml", data, []))
    assert env.private_fields == {"answer", "solution"}


def test_digits_label_was_public(tmp_path: Path) -> None:
    data = ENVS / "data" / "digits" / "test-00000-of-00001.parquet"
    old = [("exclude: [image_base64, pixels_8x8, label, id]", "exclude: [image_base64, pixels_8x8]")]
    code, out = _validate(_spec(tmp_path, "digits.yaml", data, old))
    assert code == 1
    assert "field 'label' equals the gold answer on 200 of 200 sampled test tasks" in out
    # Row ids 0-9 equal their digit: a small leak, found too.
    assert "task.id equals the gold answer on 10 of 200" in out


def test_gsm8k_tools_hint_gave_the_answer_away(tmp_path: Path) -> None:
    data = ENVS / "data" / "gsm8k" / "test-00000-of-00001.parquet"
    # Before: the first line of the worked solution, which often reaches the final answer.
    new = (ENVS / "gsm8k_tools.yaml").read_text(encoding="utf-8").split("    template: >-\n")[1]
    new = new.split("    max_calls: 1")[0]
    old = [(new, "      First step: {{ answer.split('\\n')[0] }}\n")]
    base = (ENVS / "gsm8k.yaml").read_text(encoding="utf-8")
    base = re.sub(r"(?m)^\s+train: .*\n", "", base)
    base = re.sub(r"(?m)^(\s+test: )data/\S+$", r"\1test.parquet", base)
    (tmp_path / "gsm8k.yaml").write_text(base, encoding="utf-8")
    code, out = _validate(_spec(tmp_path, "gsm8k_tools.yaml", data, old))
    assert code == 1, out
    assert re.search(r"tool 'hint' contains the gold answer on \d+ of 200 sampled test tasks", out), out
    assert "Reword the tool's template" in out


def test_an_id_column_that_is_the_answer_repeats_and_leaks(tmp_path: Path) -> None:
    data = ENVS / "data" / "math500" / "test-00000-of-00001.parquet"
    spec = _spec(tmp_path, "math500.yaml", data, [("grader:", "task: {id: answer}\n\ngrader:")])
    code, out = _validate(spec)
    assert code == 1
    assert re.search(r"\d+ task ids repeat in split 'test' \(of its first 500 tasks\): '\S+' at rows", out)
    assert "Give `task: {id: …}` a column whose values are unique" in out
    assert "task.id equals the gold answer on 200 of 200 sampled test tasks" in out
    assert "Choose an id column that is not the answer" in out
    result = runner.invoke(app, ["check", spec])
    assert result.exit_code == 1 and "task ids repeat" in result.output


def test_hh_rlhf_rejected_response_was_public() -> None:
    """The reply raters did not prefer tells which one they did: both labels are private."""
    env = load_environment(ENVS / "hh_rlhf.yaml")
    task = env.split("test").task(0)
    assert {"chosen_response", "rejected_response"} <= task.keys()
    assert not {"chosen_response", "rejected_response"} & env.public(task).keys()
