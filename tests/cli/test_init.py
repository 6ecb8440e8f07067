"""`envbuilder init`: a scaffolded spec validates and checks clean, with good column guesses."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.authoring import scaffold_spec
from envbuilder.cli import app
from tests.cli.test_check import CIRCULAR
from tests.conftest import ENVS, FIXTURES

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
    assert check.output == (
        f"{out}: gold answers: 40/40 get full reward "
        "(--sample 20 per split: train 20 of 7,473, test 20 of 1,319)\n"
    )


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


def test_guesses_on_other_datasets(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    math = scaffold_spec(str(FIXTURES / "math500"))
    assert (math.prompt_column, math.answer_column, math.numeric) == ("problem", "answer", False)
    # AIME-shaped: integer answers written as strings, some with leading zeros.
    aime = tmp_path / "aime"
    aime.mkdir()
    pq.write_table(
        pa.table(
            {
                "id": [0, 1, 2],
                "problem": ["Find $x$.", "Find $y$.", "Find $z$."],
                "solution": ["So $x=25$.", "So $y=73$.", "So $z=204$."],
                "answer": ["025", "073", "204"],
            }
        ),
        aime / "test-00000-of-00001.parquet",
    )
    guess = scaffold_spec(str(aime))
    assert (guess.answer_column, guess.numeric, guess.splits) == ("answer", True, ["test"])


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


def test_init_huggingface_dataset_validates_and_checks_clean(tmp_path: Path, hub_gsm8k: Path) -> None:
    out = tmp_path / "hf_gsm8k.yaml"
    folder = hub_gsm8k
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
    # A prompt that is its own answer: the spec is written, and validation says it leaks.
    assert result.exit_code == 1 and "the prompt contains the gold answer on 80 of 80" in result.output
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


def test_init_mt_bench_jsonl_reads_the_conversation_and_says_which_rows_lack_a_reference(
    tmp_path: Path,
) -> None:
    out = tmp_path / "mt.yaml"
    result = runner.invoke(app, ["init", str(FIXTURES / "mt_bench" / "question.jsonl"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"{out}: prompt: the conversation in 'messages', answer column 'reference', grader exact_match,"
        " splits test, task id 'question_id'\n"
        f"{out}: 8 of the first 16 rows have no 'reference' to grade against; each split keeps only the"
        " rows that have one (`filter:`)\n"
        f"{out}: valid (test 8 tasks); next: envbuilder preview {out}\n"
    )
    text = out.read_text(encoding="utf-8")
    assert "  type: jsonl\n" in text and "  conversation:\n    column: messages\n" in text
    assert "  test: {type: test, filter: \"reference is not none and reference != ''\"}\n" in text
    assert "  id: question_id" in text and '  target: "{{ reference[0] }}"\n' in text
    from tests.cli.test_schema import _schema_errors

    assert _schema_errors(text) == []  # a spec envbuilder accepts, editors accept too
    check = runner.invoke(app, ["check", str(out)])
    assert check.exit_code == 0, check.output  # no sample row has a null target


def test_init_math500_picks_the_math_grader_and_the_unique_id(tmp_path: Path) -> None:
    pytest.importorskip("math_verify")
    out = tmp_path / "math.yaml"
    result = runner.invoke(app, ["init", str(FIXTURES / "math500"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"{out}: prompt column 'problem', answer column 'answer', grader math, splits test,"
        " task id 'unique_id'\n"
    )
    check = runner.invoke(app, ["check", str(out), "--sample", "40"])
    # No `gold:` (only a GSM8K-style reference gets one): check says its gold check is circular.
    assert (check.exit_code, check.output) == (
        0,
        f"{out}: gold answers: 40/40 get full reward (--sample 40 per split: test 40 of 40)\n"
        + CIRCULAR.format(spec=out)
        + "\n",
    )


def test_init_lettered_options_pick_the_choice_grader(tmp_path: Path) -> None:
    out = tmp_path / "mmlu.yaml"
    result = runner.invoke(app, ["init", str(ENVS / "data" / "mmlu_stem"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "grader choice (options: choices), splits validation, test\n" in result.output
    text = out.read_text(encoding="utf-8")
    assert "    {{ choices | lettered }}\n" in text and "  choices_field: choices\n" in text
    check = runner.invoke(app, ["check", str(out), "--sample", "20"])
    # No `gold:` (only a GSM8K-style reference gets one): check says its gold check is circular.
    assert (check.exit_code, check.output) == (
        0,
        f"{out}: gold answers: 30/30 get full reward "
        "(--sample 20 per split: validation 10 of 10, test 20 of 200)\n" + CIRCULAR.format(spec=out) + "\n",
    )


def test_the_answer_column_is_never_the_prompt(tmp_path: Path) -> None:
    """`--answer-column capital` on a table whose longest text column is `capital`: the prompt is
    another column (naming one column as both is written as asked: see the next test)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    capitals = ["Ulaanbaatar", "Ouagadougou", "Antananarivo", "Kuala Lumpur"]
    pq.write_table(
        pa.table({"country": ["Mongolia", "Burkina Faso", "Madagascar", "Malaysia"], "capital": capitals}),
        tmp_path / "train.parquet",
    )
    out = tmp_path / "s.yaml"
    args = ["init", str(tmp_path / "train.parquet"), "-o", str(out), "--answer-column", "capital"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "{{ country }}" in text and "{{ capital }}" not in text.split("grader:")[0]
    assert runner.invoke(app, ["validate", str(out)]).exit_code == 0


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_init_reads_json_and_csv(kind: str, tmp_path: Path) -> None:
    import json

    rows = [{"uid": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(5)]
    path = tmp_path / f"train.{kind}"
    if kind == "json":
        path.write_text(json.dumps(rows))
    else:
        lines = [f"{r['uid']},{r['question']},{r['answer']}\n" for r in rows]
        path.write_text("uid,question,answer\n" + "".join(lines))
    out = tmp_path / "spec.yaml"
    result = runner.invoke(app, ["init", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"  type: {kind}\n" in out.read_text(encoding="utf-8") and "task id 'uid'" in result.output
    check = runner.invoke(app, ["check", str(out)])
    # No `gold:` (only a GSM8K-style reference gets one): check says its gold check is circular.
    assert (check.exit_code, check.output) == (
        0,
        f"{out}: gold answers: 5/5 get full reward (--sample 50 per split: train 5 of 5)\n"
        + CIRCULAR.format(spec=out)
        + "\n",
    )


def test_init_unreadable_file_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello")
    result = runner.invoke(app, ["init", str(tmp_path / "data.txt")])
    assert result.exit_code == 1 and "expected a .parquet, .jsonl, .json, .csv file" in result.output


def test_init_hub_id_without_a_reachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    started = time.monotonic()
    result = runner.invoke(app, ["init", "no-such-owner/no-such-dataset"])
    assert result.exit_code == 1
    assert result.output.startswith(
        "error: cannot read the hub dataset 'no-such-owner/no-such-dataset': the hub cannot be reached"
        f" (cannot connect to 127.0.0.1:{port}: Connection refused)."
    )
    assert "HF_HUB_OFFLINE=1" in result.output
    assert time.monotonic() - started < 10  # not datasets's retries (about 25 s)


def test_the_authoring_guides_init_example_is_what_init_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    import shutil

    from tests.conftest import ROOT

    readme = (ROOT / "docs" / "how-to" / "authoring.md").read_text(encoding="utf-8")
    block = re.search(r"```\n\$ envbuilder init (tests/fixtures/\S+) --out (\S+)\n(.*?)\$ grep", readme, re.S)
    assert block is not None
    source, out, printed = block.groups()
    shutil.copytree(ROOT / "tests" / "fixtures", tmp_path / "tests" / "fixtures")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["init", source, "--out", out])
    assert (result.exit_code, result.output) == (0, printed)
    assert "splits:\n  test: {type: test, filter: \"reference is not none and reference != ''\"}\n" in (
        tmp_path / out
    ).read_text(encoding="utf-8")
