"""The CLI's error boundary (cli/_output.py): a file a command cannot write is one error line
naming the file and the system's reason, exit 1, never a traceback; other errors are not hidden."""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.cli._output import fail_on_errors
from tests.conftest import ENVS
from tests.eval.conftest import submit
from tests.fakes.chat_server import ChatServer

GSM8K = str(ENVS / "gsm8k.yaml")
DIGITS = str(ENVS / "data" / "digits")


def answer_anything(request: dict[str, Any], i: int):
    return submit("0")  # any answer: what these tests check ends before grading matters


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _refused(result, blocker: Path) -> None:
    """One clear error about ``blocker`` (a file where a folder was needed), exit 1."""
    assert result.exit_code == 1, result.output
    assert not isinstance(result.exception, OSError), result.exception
    assert "Traceback" not in result.output and ".tmp" not in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert line.startswith("error: cannot ") and f"{blocker} is a file, not a folder" in line


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A regular file that the paths below take for a folder."""
    path = tmp_path / "runs.jsonl"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["pack", GSM8K, "--out", "{under}/gsm8k.zip"], id="pack"),
        pytest.param(["init", DIGITS, "--out", "{under}/digits.yaml"], id="init"),
        pytest.param(["init", DIGITS, "--out", "{under}/deeper/digits.yaml"], id="init-deeper"),
        pytest.param(["catalog", GSM8K, "--out", "{under}/site"], id="catalog"),
        pytest.param(["catalog", GSM8K, "--readme", "{under}/README.md"], id="catalog-readme"),
        pytest.param(["export", "verifiers", GSM8K, "--out", "{under}/pkg"], id="export"),
        pytest.param(
            [
                "profile",
                GSM8K,
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--limit",
                "1",
                "--out",
                "{under}/p.jsonl",
            ],
            id="profile",
        ),
    ],
)
def test_a_command_that_cannot_write_its_output_says_so(args: list[str], blocker: Path) -> None:
    _refused(cli(*(a.replace("{under}", str(blocker)) for a in args)), blocker)


@pytest.mark.parametrize("out", ["{under}/x.jsonl", "{under}/deeper/x.jsonl"])
def test_eval_refuses_an_out_it_cannot_make_before_any_episode(out: str, blocker: Path) -> None:
    with ChatServer(answer_anything) as server:
        result = cli("eval", GSM8K, "--model", "m", "--base-url", server.base_url, "--limit", "2",
                     "--out", out.replace("{under}", str(blocker)))  # fmt: skip
    _refused(result, blocker)
    assert "cannot open the results file" in result.output
    assert server.requests == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc takes no new files on Linux")
def test_eval_names_the_out_file_not_its_temporary_file() -> None:
    with ChatServer(answer_anything) as server:
        result = cli("eval", GSM8K, "--model", "m", "--base-url", server.base_url, "--limit", "2",
                     "--out", "/proc/x.jsonl")  # fmt: skip
    assert result.exit_code == 1 and not isinstance(result.exception, OSError), result.output
    assert "error: cannot open the results file /proc/x.jsonl: " in result.output
    assert ".tmp" not in result.output and "Traceback" not in result.output


def test_view_cannot_write_its_page(blocker: Path, tmp_path: Path) -> None:
    run = tmp_path / "r.jsonl"
    with ChatServer(answer_anything) as server:
        made = cli("eval", GSM8K, "--model", "m", "--base-url", server.base_url, "--limit", "1",
                   "--out", str(run))  # fmt: skip
    assert made.exit_code == 0, made.output
    _refused(cli("view", str(run), "--out", str(blocker / "r.html")), blocker)


def test_the_boundary_does_not_hide_other_errors() -> None:
    """An OSError without a file (a socket's, a bug's) goes on with its traceback."""
    with pytest.raises(ConnectionResetError), fail_on_errors():
        raise ConnectionResetError(errno.ECONNRESET, "reset")
    with pytest.raises(typer.Exit), fail_on_errors():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", "some/folder")
