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


BOMS = ["utf-8-sig", "utf-16", "utf-16-be-bom", "utf-32", "utf-32-be-bom"]


def _with_bom(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding`` after its byte-order mark (Python's utf-16 and utf-32 write
    the machine's byte order; the `-be-bom` names write big-endian)."""
    if encoding.endswith("-be-bom"):
        name = encoding.removesuffix("-bom")
        return ("\ufeff" + text).encode(name)
    return text.encode(encoding)


def _data(folder: Path, kind: str, encoding: str) -> Path:
    rows = [{"question": q, "answer": a} for q, a in ROWS]
    if kind == "csv":
        text = "question,answer\n" + "".join(f'"{q}",{a}\n' for q, a in ROWS)
    elif kind == "json":
        text = json.dumps(rows, ensure_ascii=False)
    else:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path = folder / f"data.{kind}"
    path.write_bytes(_with_bom(text, encoding))
    return path


@pytest.mark.parametrize("kind", ["csv", "jsonl", "json"])
@pytest.mark.parametrize("encoding", BOMS)
def test_a_file_with_a_byte_order_mark_is_read_as_it_says(kind: str, encoding: str, tmp_path: Path) -> None:
    """UTF-16 from Excel's "Unicode text" or `iconv -t UTF-16` needs no `encoding:`: `init`
    writes none, and `validate` and the environment read it."""
    data = _data(tmp_path, kind, encoding)
    out = tmp_path / "init.yaml"
    result = runner.invoke(app, ["init", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "encoding:" not in out.read_text(encoding="utf-8")
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 0, result.output
    split = load_environment(out).split("test")
    assert [(t["question"], str(t["answer"])) for t in split.task_range(0, 2)] == ROWS


def test_a_byte_order_mark_wins_over_the_declared_encoding(tmp_path: Path) -> None:
    data = _data(tmp_path, "csv", "utf-16")
    spec = _spec(tmp_path, "jsonl", "cp1252")  # (then pointed at the UTF-16 CSV)
    spec.write_text(spec.read_text().replace("type: jsonl", "type: csv").replace("data.jsonl", data.name))
    assert load_environment(spec).split("test").task(1)["question"] == ROWS[1][0]


def test_a_legacy_file_beside_a_marked_one_gets_its_own_encoding(tmp_path: Path) -> None:
    """The UTF-16 file is not what makes the folder "cp1252" (or "latin-1")."""
    (tmp_path / "a").mkdir()
    _data(tmp_path / "a", "csv", "utf-16")
    (tmp_path / "b").mkdir()
    _spec(tmp_path / "b", "csv", None)
    from envbuilder.data import detect_encoding

    paths = [tmp_path / "a" / "data.csv", tmp_path / "b" / "data.csv"]
    assert detect_encoding(paths) == "cp1252"
    assert detect_encoding(paths[:1]) is None


@pytest.mark.parametrize("kind", ["csv", "jsonl", "json"])
def test_a_utf16_file_is_read_in_blocks(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A UTF-16 line break is two bytes, and only the first block holds the mark."""
    from envbuilder.data import _files

    monkeypatch.setattr(_files, "_BLOCK", 4096)
    monkeypatch.setattr(_files, "_JSON_ROWS", 100)

    def whole(*_: object) -> None:
        raise AssertionError("read the file whole")

    for source in (_files.JsonlSource, _files.JsonSource, _files.CsvSource):
        monkeypatch.setattr(source, "read_all", whole)
    rows = [{"question": f"Größe {i}", "answer": str(i)} for i in range(2000)]
    if kind == "csv":
        text = "question,answer\n" + "".join(f"{r['question']},{r['answer']}\n" for r in rows)
    elif kind == "json":
        text = json.dumps(rows, ensure_ascii=False, indent=1)
    else:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    spec = _spec(tmp_path, kind, None)
    (tmp_path / f"data.{kind}").write_bytes(_with_bom(text, "utf-16-be-bom"))  # over _spec's
    split = load_environment(spec).split("test")
    assert len(split) == 2000
    assert [t["question"] for t in split.task_range(1995, 2000)] == [f"Größe {i}" for i in range(1995, 2000)]
