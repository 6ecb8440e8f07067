"""What a run records of its tasks: the public fields (as ``/task`` returns them), the same
in-process as against a server; never a private field (the gold answer), not in the records, the
HTML page, ``--group-by`` or regrade's errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.cli import app
from tests.conftest import ENVS
from tests.eval.conftest import write_arithmetic
from tests.fakes.chat_server import ChatServer, reply

GSM8K = str(ENVS / "gsm8k.yaml")
NOBODY = "http://127.0.0.1:9/v1"  # nothing listens: every episode ends in an error
GOLD = "#### 18"  # in the first GSM8K test task's answer


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _tasks(path: Path) -> list[dict[str, object]]:
    lines = path.read_text().splitlines()[1:]
    return [json.loads(line)["task"] for line in lines if '"task"' in line]


def _errored_run(target: str, out: Path) -> None:
    result = cli("eval", target, "--model", "m", "--base-url", NOBODY, "--limit", "2", "--max-retries", "0",
                 "--out", str(out))  # fmt: skip
    assert "2 episode(s) ended in an error" in result.output, result.output


def test_in_process_and_served_runs_record_the_same_public_fields(gsm8k_url: str, tmp_path: Path) -> None:
    local, served = tmp_path / "local.jsonl", tmp_path / "served.jsonl"
    _errored_run(GSM8K, local)
    _errored_run(gsm8k_url, served)
    assert _tasks(local) == _tasks(served)
    assert [t["id"] for t in _tasks(local)] == ["test-0", "test-1"]
    assert all("answer" not in t for t in _tasks(local))
    assert cli("view", str(local)).exit_code == 0
    for path in (local, local.with_suffix(".html")):
        assert GOLD not in path.read_text()


def test_group_by_a_private_field_is_refused_a_public_one_works(tmp_path: Path) -> None:
    square = str(write_arithmetic(tmp_path / "envs", names=("square",)) / "square.yaml")
    result = cli("eval", square, "--model", "m", "--base-url", NOBODY, "--max-retries", "0",
                 "--group-by", "value", "--out", str(tmp_path / "value.jsonl"))  # fmt: skip
    assert result.exit_code == 1
    assert (
        "error: --group-by 'value': a private field of square's tasks (what the grader reads), "
        "which runs do not record"
    ) in result.output
    assert "Group by a field the tasks show (as /task returns them)" in result.output
    out = tmp_path / "parity.jsonl"
    result = cli("eval", square, "--model", "m", "--base-url", NOBODY, "--max-retries", "0",
                 "--group-by", "parity", "--out", str(out))  # fmt: skip
    assert "episode(s) ended in an error" in result.output, result.output
    assert {t["parity"] for t in _tasks(out)} == {"even", "odd"}
    assert all("value" not in t for t in _tasks(out))


def test_regrade_errors_never_quote_a_private_field(tmp_path: Path) -> None:
    run = tmp_path / "gsm8k.jsonl"
    with ChatServer(lambda body, i: (200, reply("no idea"), {})) as model:  # answers, never submits
        result = cli("eval", GSM8K, "--model", "m", "--base-url", model.base_url, "--limit", "2",
                     "--max-turns", "1", "--out", str(run))  # fmt: skip
    assert result.exit_code == 0, result.output
    # a run recorded before only public fields were (its tasks held the gold answer)
    from envbuilder.environment import load_environment

    test = load_environment(GSM8K).split("test")
    gold = test.task(0)["answer"]
    header, *records = (json.loads(line) for line in run.read_text().splitlines())
    for record in records:  # (every record: which one regrade reads first depends on the run)
        record["task"]["answer"] = test.task(int(record["index"]))["answer"]
    run.write_text("".join(json.dumps(r) + "\n" for r in (header, *records)))
    assert gold in [t["answer"] for t in _tasks(run)]
    new = tmp_path / "regraded.jsonl"
    result = cli("eval", "regrade", str(run), "--spec", str(ENVS / "math500.yaml"), "--out", str(new))
    assert result.exit_code == 1
    assert "is another task in the new spec (its private field 'answer' differs)" in result.output
    assert GOLD not in result.output and "\\boxed" not in result.output
