"""The tutorials, followed as a reader would: each command on the page is run in a fresh folder and
prints exactly what the page shows, each file the page shows is the file shipped beside it (or the
one the command wrote), and each episode played with the client against a real server prints
what the page says."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import load_environment
from envbuilder.server import ServerSettings, create_app
from tests.docs.pages import DOCS, blocks, page, section, steps
from tests.servers import serve_app

FILES = DOCS / "tutorials" / "files"
runner = CliRunner()


def _run(command: str) -> str:
    """An ``envbuilder`` command of the page, run in the current folder; its output."""
    words = shlex.split(command, comments=True)
    assert words[0] == "envbuilder", command
    result = runner.invoke(app, words[1:])
    assert result.exit_code == 0, (command, result.output)
    return result.output.strip("\n")


def _console(text: str) -> Iterator[tuple[str, str]]:
    """The steps of the page's console blocks, in order."""
    for block in blocks(text, "console"):
        yield from steps(block)


@contextlib.contextmanager
def _served(spec: Path) -> Iterator[str]:
    with serve_app(create_app([load_environment(spec)], ServerSettings())) as url:
        yield url


def _play(block: str, url: str) -> list[str]:
    """The page's client code against ``url`` (for the page's http://127.0.0.1:8080); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.replace("http://127.0.0.1:8080", url), "tutorial", "exec"), {})
    return out.getvalue().rstrip("\n").split("\n")


def _commented(block: str) -> list[str]:
    """What the ``print(...)  # text`` lines of a block say they print."""
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)[ \t]+# (.+)$", block, re.M)]


def _serving_line(text: str, spec: Path) -> None:
    """The page's `envbuilder serve` output names the environment and its tasks as serve does."""
    (shown,) = [out for command, out in _console(text) if command.startswith("envbuilder serve")]
    env = load_environment(spec)
    assert shown.split("\n")[0] == f"envbuilder: serving {env.name} ({env.summary()} tasks)"


def test_first_environment_from_a_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page("tutorials/first-environment.md")
    shown_csv = blocks(section(text, "## 1."))[0].split("\n")
    csv = (FILES / "conversions.csv").read_text(encoding="utf-8").split("\n")
    assert shown_csv[:3] == csv[:3] and shown_csv[3] == "..."
    console = list(_console(text))
    assert console[:2] == [
        ("mkdir my-env && cd my-env", ""),
        ("cp ../docs/tutorials/files/conversions.csv .", ""),
    ]
    folder = tmp_path / "my-env"
    folder.mkdir()
    shutil.copy(FILES / "conversions.csv", folder)
    monkeypatch.chdir(folder)
    spec = folder / "conversions.yaml"

    init, preview, check, check_again, validate, serve = console[2:]
    assert _run(init[0]) == init[1]
    (written,) = blocks(text, 'yaml title="conversions.yaml"')
    assert spec.read_text(encoding="utf-8") == written
    assert _run(preview[0]) == preview[1]
    assert _run(check[0]) == check[1]

    (tests_block,) = blocks(section(text, "## 4."), "yaml")
    (splits_block,) = blocks(section(text, "## 5."), "yaml")
    assert tests_block.startswith("tests:") and splits_block.startswith("splits:")
    with spec.open("a", encoding="utf-8") as f:
        f.write(tests_block)
    assert _run(check_again[0]) == check_again[1]
    scaffolded = "splits:\n  test: {type: test}\n"
    assert scaffolded in spec.read_text(encoding="utf-8")
    spec.write_text(spec.read_text(encoding="utf-8").replace(scaffolded, splits_block), encoding="utf-8")
    assert _run(validate[0]) == validate[1]
    assert serve[0] == "envbuilder serve conversions.yaml"
    _serving_line(text, spec)

    (client,) = blocks(section(text, "## 6."), "python")
    with _served(spec) as url:
        printed = _play(client, url)
    assert printed == _commented(client)


def test_a_dialogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page("tutorials/dialogue.md")
    (row,) = blocks(section(text, "## 1."), "json")
    assert row.strip() == (FILES / "running_total.jsonl").read_text(encoding="utf-8").split("\n")[0]
    (shown,) = blocks(text, 'yaml title="running_total.yaml"')
    assert shown == (FILES / "running_total.yaml").read_text(encoding="utf-8")
    for name in ("running_total.yaml", "running_total.jsonl"):
        shutil.copy(FILES / name, tmp_path)
    monkeypatch.chdir(tmp_path)
    preview, serve = _console(text)
    assert _run(preview[0]) == preview[1]
    assert serve[0] == "envbuilder serve running_total.yaml"
    _serving_line(text, tmp_path / "running_total.yaml")

    (client,) = blocks(section(text, "## 3."), "python")
    (prints,) = blocks(section(text, "## 3."))
    with _served(tmp_path / "running_total.yaml") as url:
        printed = _play(client, url)
    assert printed == prints.rstrip("\n").split("\n")
    assert printed[-1] == _commented(client)[0]


def test_an_agent_with_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page("tutorials/agent-with-state.md")
    for name, lang in (("library.json", "json"), ("library.yaml", "yaml")):
        (shown,) = blocks(text, f'{lang} title="{name}"')
        assert shown == (FILES / name).read_text(encoding="utf-8"), name
    (rows,) = blocks(section(text, "## 2."), "json")
    assert rows.split("\n")[:2] == (FILES / "requests.jsonl").read_text(encoding="utf-8").split("\n")[:2]
    for name in ("library.json", "library.yaml", "requests.jsonl"):
        shutil.copy(FILES / name, tmp_path)
    monkeypatch.chdir(tmp_path)
    check, serve = _console(text)
    assert _run(check[0]) == check[1]
    assert serve[0] == "envbuilder serve library.yaml"
    _serving_line(text, tmp_path / "library.yaml")

    (client,) = blocks(section(text, "## 5."), "python")
    (prints,) = blocks(section(text, "## 5."))
    with _served(tmp_path / "library.yaml") as url:
        printed = _play(client, url)
    assert printed == prints.rstrip("\n").split("\n")


def test_the_tutorials_data_files_are_what_the_pages_link() -> None:
    """Every file the tutorials link in files/ exists, and every shipped file is linked."""
    linked = {
        m
        for name in ("first-environment.md", "dialogue.md", "agent-with-state.md")
        for m in re.findall(r"\]\(files/([^)#]+)\)", page(f"tutorials/{name}"))
    }
    shipped = {p.name for p in FILES.iterdir() if p.is_file()}
    assert linked == shipped
