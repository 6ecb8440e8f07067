"""`envbuilder init` on awkward data: nulls, Alpaca-style prompts, answer copies, no rows.

Whatever it is given, init either refuses with one clear error or writes a spec that its own
`validate` accepts.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import DATA

runner = CliRunner()
KINDS = ["jsonl", "json", "csv", "parquet"]


def write(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> Path:
    """``rows`` as a file of the kind of ``path``'s suffix (a null is an empty CSV cell)."""
    columns = columns if columns is not None else list(rows[0]) if rows else []
    kind = path.suffix[1:]
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif kind == "json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif kind == "csv":
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = (
            pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in columns})
        )
        pq.write_table(table, path)
    return path


def init(data: Path, out: Path, *args: str) -> str:
    """Run init on ``data``; assert that it wrote a spec its own validate accepts; its output."""
    result = runner.invoke(app, ["init", str(data), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith(f"{out}: valid ("), result.output
    again = runner.invoke(app, ["validate", str(out)])
    assert again.exit_code == 0, again.output
    return result.output


def preview(spec: Path, index: int) -> str:
    result = runner.invoke(app, ["preview", str(spec), "--index", str(index)])
    assert result.exit_code == 0, result.output
    return result.output


QUESTIONS = [f"Wie viel ist {i} + {i}?" for i in range(6)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("null_at", [0, 3, 5])
@pytest.mark.parametrize("prompt", ["frage", "question"])  # guessed by length / by name
def test_rows_without_a_prompt_are_filtered_out_and_said(
    kind: str, null_at: int, prompt: str, tmp_path: Path
) -> None:
    rows = [
        {prompt: None if i == null_at else q, "answer": str(2 * i), "note": None if i == 1 else "x"}
        for i, q in enumerate(QUESTIONS)
    ]
    out = tmp_path / "spec.yaml"
    printed = init(write(tmp_path / f"data.{kind}", rows), out)
    assert printed.splitlines()[:2] == [
        f"{out}: prompt column {prompt!r}, answer column 'answer', grader exact_match, extract: number,"
        " splits test",
        f"{out}: 1 of the first 6 rows have no {prompt!r} to ask; each split keeps only the rows that"
        " have one (`filter:`)",
    ]
    assert "valid (test 5 tasks)" in printed
    text = out.read_text(encoding="utf-8")
    assert (
        f"# 1 of the first 6 rows have no `{prompt}` to ask:\n"
        "# each split keeps only the rows that have one.\n"
        "splits:\n"
        f"  test: {{type: test, filter: \"{prompt} is not none and {prompt} != ''\"}}\n"
    ) in text


@pytest.mark.parametrize("kind", KINDS)
def test_rows_without_a_prompt_or_an_answer_are_both_filtered_out(kind: str, tmp_path: Path) -> None:
    rows = [
        {
            "question_id": None if i == 2 else f"q{i}",
            "question": None if i == 4 else q,
            "answer": None if i == 0 else str(2 * i),
        }
        for i, q in enumerate(QUESTIONS)
    ]
    out = tmp_path / "spec.yaml"
    printed = init(write(tmp_path / f"data.{kind}", rows), out)
    assert "valid (test 4 tasks)" in printed and "task id" not in printed  # a null id is no id
    assert (
        "# 1 of the first 6 rows have no `answer` to grade against\n"
        "# 1 of the first 6 rows have no `question` to ask:\n"
        "# each split keeps only the rows that have both.\n"
        "splits:\n"
        "  test: {type: test, filter: \"answer is not none and answer != '' and question is not none"
        " and question != ''\"}\n"
    ) in out.read_text(encoding="utf-8")


ALPACA = [
    {"instruction": "Give three tips for staying healthy.", "input": "", "output": "Eat, move, sleep"},
    {"instruction": "Translate to French.", "input": "Good morning", "output": "Bonjour"},
    {"instruction": "Capital of France?", "input": "", "output": "Paris"},
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
    {"instruction": "Name a primary colour.", "input": "", "output": "Red"},
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("columns", "more"),
    [(("instruction", "input", "output"), "input"), (("instruction", "context", "response"), "context")],
)  # Alpaca; Dolly
def test_an_instruction_is_the_prompt_and_its_input_follows_it(
    kind: str, columns: tuple[str, str, str], more: str, tmp_path: Path
) -> None:
    rows = [dict(zip(columns, r.values(), strict=True)) for r in ALPACA]
    out = tmp_path / "spec.yaml"
    printed = init(write(tmp_path / f"data.{kind}", rows), out)
    assert printed.startswith(f"{out}: prompt column 'instruction', answer column {columns[2]!r}")
    assert (
        "  template: |-\n"
        "    {{ instruction }}\n"
        f"    {{% if {more} %}}\n"
        "\n"
        f"    {{{{ {more} }}}}\n"
        "    {% endif %}\n"
        "\n"
        "    When you are done"
    ) in out.read_text(encoding="utf-8")
    done = "When you are done, call the `submit` tool with your final answer.\n"
    assert f"[user]\nGive three tips for staying healthy.\n\n{done}" in preview(out, 0)
    assert f"[user]\nTranslate to French.\n\nGood morning\n\n{done}" in preview(out, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_named_column_empty_on_most_rows_is_not_the_prompt(kind: str, tmp_path: Path) -> None:
    rows = [
        {"query": "", "body": "Which planet is known as the red planet?", "answer": "Mars"},
        {"query": "", "body": "Which gas do plants take in?", "answer": "Carbon dioxide"},
        {"query": "see above", "body": "What is frozen water called?", "answer": "Ice"},
        {"query": "", "body": "What is the largest ocean?", "answer": "Pacific"},
    ]
    out = tmp_path / "spec.yaml"
    assert init(write(tmp_path / f"data.{kind}", rows), out).startswith(f"{out}: prompt column 'body'")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "copy", [lambda i: 2 * i + 1, lambda i: float(2 * i + 1), lambda i: f" {2 * i + 1} "]
)
def test_a_column_equal_to_the_answer_is_private(kind: str, copy: Any, tmp_path: Path) -> None:
    rows = [
        {"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1), "label": copy(i)} for i in range(12)
    ]
    out = tmp_path / "spec.yaml"
    init(write(tmp_path / f"data.{kind}", rows), out)
    assert "  private: [answer, label]\n" in out.read_text(encoding="utf-8")


def test_digits_ids_and_label_that_give_the_answer_away_are_dropped(tmp_path: Path) -> None:
    """The digits data: `label` is the answer as int64, and its `id` equals the answer on rows 0-9."""
    out = tmp_path / "digits.yaml"
    init(DATA / "digits", out)
    text = out.read_text(encoding="utf-8")
    assert "  exclude: [id]\n" in text and "  private: [answer, label]\n" in text


@pytest.mark.parametrize("kind", KINDS)
def test_a_repeated_id_column_is_not_the_task_id(kind: str, tmp_path: Path) -> None:
    rows = [{"id": i // 2, "question": q, "answer": str(i + 10)} for i, q in enumerate(QUESTIONS)]
    out = tmp_path / "spec.yaml"
    init(write(tmp_path / f"data.{kind}", rows), out)
    assert "  exclude: [id]\n" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", [False, True])
def test_data_without_rows_says_so(kind: str, given: bool, tmp_path: Path) -> None:
    path = write(tmp_path / f"data.{kind}", [], ["question", "answer"])
    args = ["--prompt-column", "question", "--answer-column", "answer"] if given else []
    result = runner.invoke(app, ["init", str(path), "--out", str(tmp_path / "s.yaml"), *args])
    assert (result.exit_code, result.output) == (
        1,
        f"error: the data has no rows: {kind} file {path} (split 'test') is empty."
        " Give data with at least one row (a header alone is no row)\n",
    )
    assert not (tmp_path / "s.yaml").exists()


def test_long_free_text_answers_make_one_grader(tmp_path: Path) -> None:
    essay = "A long answer that an exact match will rarely meet, written out at length. " * 3
    rows = [{"question": f"Explain topic {i}.", "answer": f"{essay}{i}"} for i in range(4)]
    out = tmp_path / "spec.yaml"
    printed = init(write(tmp_path / "data.jsonl", rows), out)
    assert "long free text" in printed
    assert out.read_text(encoding="utf-8").count("\ngrader:") == 1


HOSTILE: dict[str, list[dict[str, Any]]] = {
    "nulls_everywhere": [
        {"id": None if i == 3 else i, "q": None if i % 4 == 1 else f"Question number {i}?",
         "answer": None if i == 2 else str(i * 7), "hint": None if i % 2 else str(i * 7)}
        for i in range(10)
    ],
    "answer_in_every_column": [
        {"uid": f"u{i * 11}", "question": f"Compute {i} times 11.", "answer": str(i * 11),
         "solution": f"{i} * 11 = {i * 11}", "label": i * 11, "meta": {"gold": i * 11}}
        for i in range(2, 14)
    ],
    "alpaca_nulls": [{**r, "input": None if not r["input"] else r["input"]} for r in ALPACA],
    "odd_names": [
        {"Frage Text": None if i == 4 else f"Was ist {i} mal {i}?", "Antwort": str(i * i),
         "answer": str(i * i)}
        for i in range(2, 8)
    ],
}  # fmt: skip
SHIPPED = [(name, []) for name in ("digits", "gsm8k", "math500", "mmlu_stem", "mt_bench")] + [
    ("hh_rlhf", ["--answer-column", "chosen_response"]),
    ("humaneval", ["--answer-column", "canonical_solution"]),
    ("phone_support", ["--answer-column", "scenario"]),
    ("tau2_retail", ["--answer-column", "reward_basis"]),
    ("tomli", ["--answer-column", "patch"]),
]


@pytest.mark.parametrize(("name", "args"), SHIPPED, ids=[n for n, _ in SHIPPED])
def test_init_writes_specs_that_validate_shipped(name: str, args: list[str], tmp_path: Path) -> None:
    init(DATA / name, tmp_path / "spec.yaml", *args)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_init_writes_specs_that_validate_hostile(name: str, kind: str, tmp_path: Path) -> None:
    rows = HOSTILE[name]
    if kind == "csv":  # a CSV cell is text
        rows = [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows]
    init(write(tmp_path / f"data.{kind}", rows), tmp_path / "spec.yaml")


def test_rows_without_a_prompt_a_filter_cannot_name_are_said(tmp_path: Path) -> None:
    rows = [{"Frage Text": None if i == 1 else q, "answer": str(2 * i)} for i, q in enumerate(QUESTIONS)]
    out = tmp_path / "spec.yaml"
    printed = init(write(tmp_path / "data.jsonl", rows), out)
    assert printed.splitlines()[1] == (
        f"{out}: 1 of the first 6 rows have no 'Frage Text' to ask; a `filter:` cannot name this column:"
        " rename it in the data to drop those rows"
    )
    assert (
        "# 1 of the first 6 rows have no `Frage Text` to ask: a `filter:` cannot name this column,\n"
        "# rename it in the data to drop them.\nsplits:\n  test: {type: test}\n"
    ) in out.read_text(encoding="utf-8")
