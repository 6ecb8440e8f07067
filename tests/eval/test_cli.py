"""``envbuilder eval`` and ``eval compare`` as a user runs them, against the scripted chat server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS
from tests.eval.conftest import KEY, right_when
from tests.fakes.chat_server import ChatServer, HungServer

GSM8K = str(ENVS / "gsm8k.yaml")


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_a_run_prints_the_table_and_writes_its_summary(answers, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ChatServer(right_when(answers, lambda i: i % 2 == 0)) as server:
        result = cli(
            "eval",
            GSM8K,
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "FAKE_KEY",
            "--limit",
            "4",
            "--concurrency",
            "2",
            "--out",
            str(out),
            "--temperature",
            "0.5",
            env={"FAKE_KEY": KEY},
        )
        assert result.exit_code == 0, result.output
        assert server.headers_seen[0]["authorization"] == f"Bearer {KEY}"
        assert "gsm8k/test: 4 episodes (4 tasks × 1), run " in result.output
        assert "correct 2, incorrect 2, ungradeable 0, void 0, no answer 0, error 0" in result.output
        # 1,0,1,0: the Wilson interval of 2 in 4, flagged as resting on few tasks
        assert "0.500 [0.150, 0.850] (few: 4 tasks)" in result.output
        assert (
            "envbuilder: 95% intervals: mean reward (all), mean reward (graded), accuracy, pass@1: Wilson"
            in (result.output)
        )
        assert "50.0%" in result.output
        assert KEY not in result.output and KEY not in out.read_text()
        summary = json.loads((tmp_path / "r.summary.json").read_text())
        assert summary["command"] == (
            f"envbuilder eval {GSM8K} --model m --base-url {server.base_url} "
            f"--api-key-env FAKE_KEY --limit 4 --max-turns 10 --temperature 0.5 "
            f"--out {out}"
        )
        assert summary["summary"]["outcomes"]["correct"] == 2
        assert summary["summary"]["mean_reward_all"]["ci95"] == pytest.approx([0.1500, 0.8500], abs=1e-3)
        assert summary["summary"]["mean_reward_all"]["method"] == "wilson"
        again = cli(
            "eval",
            GSM8K,
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "FAKE_KEY",
            "--limit",
            "4",
            "--out",
            str(out),
            "--temperature",
            "0.5",
        )
        assert again.exit_code == 0 and "4 already in" in again.output and len(server.requests) == 4
        other = cli(
            "eval",
            GSM8K,
            "--model",
            "other",
            "--base-url",
            server.base_url,
            "--limit",
            "4",
            "--out",
            str(out),
            "--temperature",
            "0.5",
        )
    assert other.exit_code == 1 and len(server.requests) == 4
    assert (
        "belongs to another run" in other.output and '--model: "m" in the file, "other" now' in other.output
    )
    assert "Traceback" not in other.output


def test_an_all_error_run_exits_1_with_the_reasons(tmp_path: Path) -> None:
    args = ["eval", GSM8K, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--limit", "2",
            "--max-retries", "1", "--progress-every", "0.1"]  # fmt: skip
    result = cli(*args)
    assert result.exit_code == 1, result.output
    # while it waits to retry, the progress lines say so: a failing run is not silent
    retrying = "; 2 request(s) retried, the last after unreachable (ConnectError)"
    assert "envbuilder: 0/2 episodes, 0.00/s, 0 errors, 0 s" + retrying in result.output
    assert "error 2" in result.output and "error: unreachable (ConnectError)" in result.output
    assert "error: 2 episode(s) ended in an error (--max-errors 0)" in result.output
    assert cli(*args, "--max-errors", "2").exit_code == 0


def test_progress_lines_without_a_terminal(answers) -> None:
    slow = right_when(answers, lambda i: True)

    def handler(req: dict[str, Any], i: int):
        time.sleep(0.15)
        return slow(req, i)

    with ChatServer(handler) as server:
        result = cli(
            "eval",
            GSM8K,
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--limit",
            "4",
            "--concurrency",
            "1",
            "--progress-every",
            "0.1",
        )
    assert result.exit_code == 0, result.output
    lines = [x for x in result.output.splitlines() if x.startswith("envbuilder: ") and " episodes, " in x]
    assert len(lines) >= 3, result.output
    assert lines[-1].startswith("envbuilder: 4/4 episodes, ") and ", 0 errors, " in lines[-1]


def test_sampling_options_are_checked() -> None:
    result = cli("eval", GSM8K, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--extra-body", "[1]")
    assert result.exit_code == 1
    assert "error: --extra-body must be a JSON object, not '[1]'" in result.output


@pytest.mark.parametrize("command", [["eval"], ["eval", "run"]])
def test_unknown_split_is_an_error_not_a_traceback(command: list[str]) -> None:
    result = cli(*command, GSM8K, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--split", "tset")
    assert result.exit_code == 1
    assert "unknown split 'tset'" in result.output and "Traceback" not in result.output


def test_against_a_url(gsm8k_url, answers) -> None:
    with ChatServer(right_when(answers, lambda i: True)) as server:
        result = cli(
            "eval", gsm8k_url, "--model", "m", "--base-url", server.base_url, "--limit", "3", "--env", "gsm8k"
        )
    assert result.exit_code == 0, result.output
    assert "100.0%" in result.output


@pytest.fixture(scope="module")
def runs(answers, tmp_path_factory) -> dict[str, Path]:
    """Three runs on 12 tasks: A right on even tasks; B right on tasks 0,1 mod 4 (the same mean,
    other tasks); C right on all (better)."""
    folder = tmp_path_factory.mktemp("runs")
    policies = {"a": lambda i: i % 2 == 0, "b": lambda i: i % 4 in (0, 1), "c": lambda i: True}
    out = {}
    for name, good in policies.items():
        out[name] = folder / f"{name}.jsonl"
        with ChatServer(right_when(answers, good)) as server:
            result = cli(
                "eval",
                GSM8K,
                "--model",
                name,
                "--base-url",
                server.base_url,
                "--limit",
                "12",
                "--out",
                str(out[name]),
            )
        assert result.exit_code == 0, result.output
    return out


def test_compare_finds_a_planted_difference(runs) -> None:
    result = cli("eval", "compare", str(runs["a"]), str(runs["c"]), "--json")
    assert result.exit_code == 0, result.output
    c = json.loads(result.output)
    overall = c["overall"]
    # per-task differences 0,1,0,1,…: mean .5, s.e. sd/sqrt(12)
    assert (overall["tasks"], overall["a"], overall["b"], overall["significant"]) == (12, 0.5, 1.0, True)
    assert overall["difference"]["mean"] == pytest.approx(0.5)
    assert overall["difference"]["stderr"] == pytest.approx((3 / 11) ** 0.5 / 12**0.5)
    text = cli("eval", "compare", str(runs["a"]), str(runs["c"])).output
    assert "a real difference at 95% (paired over the 12 tasks graded in both runs)" in text


def test_compare_finds_no_planted_non_difference(runs) -> None:
    result = cli("eval", "compare", str(runs["a"]), str(runs["b"]), "--json")
    overall = json.loads(result.output)["overall"]
    assert (overall["a"], overall["b"], overall["difference"]["mean"], overall["significant"]) == (
        0.5,
        0.5,
        0.0,
        False,
    )
    low, high = overall["difference"]["ci95"]
    assert low < 0 < high
    text = cli("eval", "compare", str(runs["a"]), str(runs["b"])).output
    assert "no difference distinguishable from 0 at 95%" in text
    by_task = json.loads(
        cli("eval", "compare", str(runs["a"]), str(runs["b"]), "--json", "--group-by", "id").output
    )
    assert len(by_task["groups"]) == 12
    assert by_task["groups"]["test-1"] == {
        "tasks": 1, "a": 0.0, "b": 1.0, "significant": False,
        "difference": {"mean": 1.0, "stderr": None, "ci95": [None, None], "n": 1, "tasks": 1, "method": None,
                       "few": True}}  # fmt: skip


def test_compare_refuses_a_file_that_is_not_a_run(runs, tmp_path: Path) -> None:
    bogus = tmp_path / "x.jsonl"
    bogus.write_text('{"index": 0}\n')
    result = cli("eval", "compare", str(runs["a"]), str(bogus))
    assert result.exit_code == 1
    assert f"error: {bogus}:1 has no run header" in result.output


def test_a_hung_endpoint_ends_each_episode_as_an_error_within_the_timeout(tmp_path: Path) -> None:
    """--timeout bounds each try; a timed-out request is retried once, not --max-retries times."""
    out = tmp_path / "r.jsonl"
    with HungServer() as server:
        started = time.monotonic()
        result = cli("eval", GSM8K, "--model", "m", "--base-url", server.base_url, "--limit", "2",
                     "--timeout", "0.5", "--max-retries", "5", "--out", str(out))  # fmt: skip
        took = time.monotonic() - started
        assert server.connections == 4  # 2 episodes × 2 tries
    assert result.exit_code == 1, result.output
    assert "correct 0, incorrect 0, ungradeable 0, void 0, no answer 0, error 2" in result.output
    assert "the model endpoint gave no answer within 0.5 s (ReadTimeout) (gave up after 2 tries)" in (
        out.read_text()
    )
    assert took < 30, took  # 2 tries of 0.5 s and a wait of at most 1 s, with room for a slow machine


def test_the_timeouts_default_is_the_models() -> None:
    from envbuilder.llm._model import DEFAULT_TIMEOUT

    shown = " ".join(cli("eval", "run", "--help", env={"COLUMNS": "400"}).output.split())
    assert f"(default: {DEFAULT_TIMEOUT:g}," in shown
