"""Text in a legacy encoding is read as text (an `encoding:` key; `init` detects it) or refused
with the encoding it reads as — never served as bytes (base64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import load_environment
from envbuilder.errors import SpecError

runner = CliRunner()
ROWS = [("Café crème: how many cups?", "5"), ("What is naïve × 2 — in “words”?", "7")]


def _spec(folder: Path, kind: str, encoding: str | None) -> Path:
    data = folder / f"data.{kind}"
    if kind == "csv":
        text = "question,answer\n" + "".join(f'"{q}",{a}\n' for q, a in ROWS)
    else:
        text = "".join(json.dumps({"question": q, "answer": a}, ensure_ascii=False) + "\n" for q, a in ROWS)
    data.write_bytes(text.encode("cp1252"))
    spec = folder / "spec.yaml"
    extra = f"\n  encoding: {encoding}" if encoding else ""
    spec.write_text(
        f"name: legacy\ndataset:\n  type: {kind}\n  files: {{test: data.{kind}}}{extra}\n"
        "splits:\n  test: {type: test}\nprompt:\n  template: '{{ question }}'\n"
        "grader:\n  type: exact_match\n  target: '{{ answer }}'\n",
        encoding="utf-8",
    )
    return spec


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_legacy_file_is_refused_naming_its_encoding(kind: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, kind, None)
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 1
    assert f"{str(tmp_path / f'data.{kind}')!r} is not utf-8 text (byte 0xe9 at offset " in result.output
    assert "it reads as cp1252. Add `encoding: cp1252` to `dataset:`" in result.output
    with pytest.raises(SpecError) as info:
        load_environment(spec)
    assert [p.code for p in info.value.problems] == ["data_encoding"]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_with_its_encoding_a_legacy_file_is_text(kind: str, tmp_path: Path) -> None:
    env = load_environment(_spec(tmp_path, kind, "cp1252"))
    assert [env.split("test").task(i)["question"] for i in range(2)] == [q for q, _ in ROWS]
    assert env.prompt(env.split("test").task(0))[0].text == ROWS[0][0]


def test_init_detects_the_encoding_and_preview_shows_text(tmp_path: Path) -> None:
    _spec(tmp_path, "csv", None)
    out = tmp_path / "init.yaml"
    result = runner.invoke(app, ["init", str(tmp_path / "data.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    assert "  encoding: cp1252   # detected: the files are not UTF-8 text\n" in written
    preview = runner.invoke(app, ["preview", str(out), "-n", "2"])
    assert preview.exit_code == 0, preview.output
    assert ROWS[0][0] in preview.output and ROWS[1][0] in preview.output


def test_an_unknown_encoding_is_a_spec_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(_spec(tmp_path, "csv", "klingon"))])
    assert result.exit_code == 1
    assert "dataset.encoding: unknown text encoding 'klingon' (e.g. utf-8, cp1252, latin-1)" in result.output
