"""`envbuilder init`: a scaffolded spec validates and checks clean, with good column guesses."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.authoring import scaffold_spec
from envbuilder.cli import app
from tests.conftest import ENVS, SHARED_DATA

runner = CliRunner()


def test_init_gsm8k_validates_and_checks_clean(tmp_path: Path) -> None:
    out = tmp_path / "specs" / "gsm8k.yaml"
    result = runner.invoke(app, ["init", str(ENVS / "data" / "gsm8k"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"{out}: prompt column 'question', answer column 'answer', grader exact_match, extract: number,"
        " splits train, test\n"
        f"{out}: valid (train 7,473 / test 1,319 tasks); next: envbuilder preview {out}\n"
    )
    text = out.read_text(encoding="utf-8")
    assert "  target: \"{{ answer.split('####')[-1] }}\"\n  # Compare" in text
    assert "  extract: number\n" in text
    check = runner.invoke(app, ["check", str(out), "--sample", "20"])
    assert check.exit_code == 0, check.output
    assert check.output == f"{out}: gold answers: 40/40 get full reward\n"


def test_init_prints_the_spec_without_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ENVS)
    result = runner.invoke(app, ["init", "data/gsm8k/test-00000-of-00001.parquet"])
    assert result.exit_code == 0
    assert "name: gsm8k\n" in result.output
    assert "  files:\n    test: data/gsm8k/test-00000-of-00001.parquet\n" in result.output
    (tmp_path / "x.yaml").write_text("")
    again = runner.invoke(app, ["init", "data/gsm8k", "--out", str(tmp_path / "x.yaml")])
    assert again.exit_code == 2  # exists, no --force


def test_init_missing_dataset_and_unguessable_answer(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert result.output.startswith("error: no file or folder at ")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["a?"], "foo": ["b"]}), tmp_path / "t.parquet")
    result = runner.invoke(app, ["init", str(tmp_path / "t.parquet")])
    assert (result.exit_code, result.output) == (
        1,
        "error: cannot tell which column holds the answer. Its columns are: question, foo;"
        " pass --answer-column\n",
    )
    result = runner.invoke(app, ["init", str(tmp_path / "t.parquet"), "--answer-column", "foo"])
    assert result.exit_code == 0 and 'target: "{{ foo }}"' in result.output


@pytest.mark.skipif(not (SHARED_DATA / "math500").is_dir(), reason="needs shared/data")
def test_guesses_on_other_datasets() -> None:
    math = scaffold_spec(str(SHARED_DATA / "math500"))
    assert (math.prompt_column, math.answer_column, math.numeric) == ("problem", "answer", False)
    aime = scaffold_spec(str(SHARED_DATA / "aime24"))
    assert (aime.answer_column, aime.numeric, aime.splits) == ("answer", True, ["test"])


def test_columns_that_are_not_names_are_renamed(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"Long Text": ["What is 1+1?"], "Gold Answer": ["2"]}), tmp_path / "train.parquet"
    )
    out = tmp_path / "s.yaml"
    result = runner.invoke(
        app, ["init", str(tmp_path / "train.parquet"), "-o", str(out), "--answer-column", "Gold Answer"]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert '  rename:\n    "Long Text": long_text\n    "Gold Answer": gold_answer\n' in text
    assert "    {{ long_text }}\n" in text


@pytest.mark.skipif(not (SHARED_DATA / "hf" / "openai__gsm8k").is_dir(), reason="needs shared/data")
def test_init_huggingface_dataset_validates_and_checks_clean(tmp_path: Path) -> None:
    out = tmp_path / "hf_gsm8k.yaml"
    folder = SHARED_DATA / "hf" / "openai__gsm8k"
    result = runner.invoke(app, ["init", str(folder), "--hf", "--config", "main", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "type: huggingface" in text and "config: main" in text
    assert "train: {type: train}" in text and "test: {type: test}" in text
    assert "extract: number" in text
    check = runner.invoke(app, ["check", str(out), "--sample", "20"])
    assert check.exit_code == 0, check.output


def test_init_hub_id_offline_says_what_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "no-such-owner/no-such-dataset"])
    assert result.exit_code == 1
    assert "HF_HUB_OFFLINE=0" in result.output and "Traceback" not in result.output


def test_init_hints_at_conversation_columns(tmp_path: Path) -> None:
    out = tmp_path / "mt.yaml"
    args = ["init", str(ENVS / "data" / "mt_bench"), "--prompt-column", "category"]
    result = runner.invoke(app, [*args, "--answer-column", "category", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert text.endswith(
        "\n# `turns` holds several user turns: to reveal them one at a time (the submit tool's\n"
        "# output is the next turn; the grader sees `turn`, `user_turns` and `replies`), use\n"
        '#   prompt: {template: "{{ turns[0] }}"}\n'
        "#   dialogue: {column: turns, grade: each, reward: mean}\n"
        "\n# `messages` holds role/content turns: to serve them as the conversation, replace\n"
        "# `prompt.template` with:\n"
        "#   conversation: {column: messages}\n"
    )
    # The suggestion, applied, is a valid dialogue.
    applied = text.replace("  template: |-\n    {{ category }}", "  template: |-\n    {{ turns[0] }}")
    applied += "dialogue: {column: turns, grade: each, reward: mean}\n"
    out.write_text(applied, encoding="utf-8")
    check = runner.invoke(app, ["validate", str(out)])
    assert check.exit_code == 0, check.output
