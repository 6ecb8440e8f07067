"""``envbuilder catalog --results``: each environment's page shows the runs evaluated on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS
from tests.eval.conftest import right_when
from tests.fakes.chat_server import ChatServer


def test_the_environment_page_shows_a_generated_leaderboard(answers, tmp_path: Path) -> None:
    runs = {}
    for model, good in {"weak": lambda i: i == 0, "strong": lambda i: i != 3}.items():
        runs[model] = tmp_path / f"{model}.jsonl"
        with ChatServer(right_when(answers, good)) as server:
            result = CliRunner().invoke(app, [
                "eval", str(ENVS / "gsm8k.yaml"), "--model", model, "--base-url", server.base_url,
                "--limit", "4", "--out", str(runs[model])])  # fmt: skip
        assert result.exit_code == 0, result.output
    other = tmp_path / "other.summary.json"
    summary = json.loads((tmp_path / "weak.summary.json").read_text())
    summary["run"]["env"] = "not-catalogued"
    other.write_text(json.dumps(summary))
    site = tmp_path / "site"
    result = CliRunner().invoke(app, [
        "catalog", str(ENVS / "gsm8k.yaml"), "--out", str(site),
        "--results", str(tmp_path / "weak.summary.json"), "--results", str(runs["strong"]),
        "--results", str(other)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "warning: 1 run(s) of 'not-catalogued', which is not in the catalog" in result.output
    board = json.loads((site / "catalog.json").read_text())["environments"][0]["leaderboard"]
    assert [(r["model"], r["score"], r["tasks"], r["samples"], r["same_version"]) for r in board] == [
        ("strong", 0.75, 4, 1, True), ("weak", 0.25, 4, 1, True)]  # fmt: skip
    # the command without local paths: the spec by its file name, no --out
    assert board[1]["command"].startswith("envbuilder eval gsm8k.yaml --model weak --base-url http")
    assert str(tmp_path) not in json.dumps(board) and str(ENVS) not in json.dumps(board)
    assert [r["not_comparable"] for r in board] == [[], []]
    html = (site / "env" / "gsm8k.html").read_text()
    rows = re.findall(r'<tr class="run"><td><code>(\w+)</code>', html)
    assert rows == ["strong", "weak"]
    assert "<td>0.750</td>" in html and "--model strong" in html


def test_a_bad_summary_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.summary.json"
    bad.write_text('{"run": {}}')
    result = CliRunner().invoke(app, ["catalog", str(ENVS / "gsm8k.yaml"), "--out", str(tmp_path / "s"),
                                      "--results", str(bad)])  # fmt: skip
    assert result.exit_code == 1
    assert (
        f"error: {bad}: not a run summary (no `run` and `summary`). Give the .summary.json" in result.output
    )


def test_runs_that_cannot_be_ranked_together_are_marked(answers, tmp_path: Path) -> None:
    runs = []
    with ChatServer(right_when(answers, lambda i: True)) as server:
        for model, limit in (("a", "4"), ("b", "4"), ("c", "2")):
            runs.append(tmp_path / f"{model}.jsonl")
            result = CliRunner().invoke(app, [
                "eval", str(ENVS / "gsm8k.yaml"), "--model", model, "--base-url", server.base_url,
                "--limit", limit, "--out", str(runs[-1])])  # fmt: skip
            assert result.exit_code == 0, result.output
    site = tmp_path / "site"
    args = ["catalog", str(ENVS / "gsm8k.yaml"), "--out", str(site)]
    result = CliRunner().invoke(app, [*args, *(x for r in runs for x in ("--results", str(r)))])
    assert result.exit_code == 0, result.output
    board = json.loads((site / "catalog.json").read_text())["environments"][0]["leaderboard"]
    assert {r["model"]: r["not_comparable"] for r in board} == {"a": [], "b": [], "c": ["2 tasks"]}
    html = (site / "env" / "gsm8k.html").read_text()
    assert "(not comparable: 2 tasks)" in html


def test_a_run_with_nothing_graded_has_no_score_and_is_ranked_last(answers, tmp_path: Path) -> None:
    """The model endpoint down for a whole run: every episode an error, which is no model scoring 0."""
    from tests.eval.test_compare import closed_port_url

    good = tmp_path / "good.jsonl"
    with ChatServer(right_when(answers, lambda i: i == 0)) as server:
        result = CliRunner().invoke(app, ["eval", str(ENVS / "gsm8k.yaml"), "--model", "good", "--base-url",
                                          server.base_url, "--limit", "4", "--out", str(good)])  # fmt: skip
        assert result.exit_code == 0, result.output
    down = tmp_path / "down.jsonl"
    result = CliRunner().invoke(app, ["eval", str(ENVS / "gsm8k.yaml"), "--model", "down", "--base-url",
                                      closed_port_url(), "--limit", "4", "--max-retries", "0",
                                      "--out", str(down)])  # fmt: skip
    assert "error 4" in result.output and "pass@" not in result.output, result.output
    site = tmp_path / "site"
    result = CliRunner().invoke(app, ["catalog", str(ENVS / "gsm8k.yaml"), "--out", str(site),
                                      "--results", str(tmp_path / "down.summary.json"),
                                      "--results", str(tmp_path / "good.summary.json")])  # fmt: skip
    assert result.exit_code == 0, result.output
    board = json.loads((site / "catalog.json").read_text())["environments"][0]["leaderboard"]
    assert [(r["model"], r["score"], r["ci95"], r["pass_at_k"]) for r in board] == [
        ("good", 0.25, board[0]["ci95"], {"1": 0.25}), ("down", None, [None, None], {})]  # fmt: skip
    assert board[1]["void"] == "void: no episode was graded (4 error)"
    html = (site / "env" / "gsm8k.html").read_text()
    row = re.search(r'<tr class="run"><td><code>down</code>.*?</tr>', html, re.S)
    assert row is not None and "0.000" not in row.group(0)
    assert "void: no episode was graded (4 error)" in row.group(0)
