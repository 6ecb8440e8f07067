"""The typed run records: files written before versions existed still read as version 1, and a
damaged run file (a run folder is untrusted input) gets an error naming file:line and the field,
from the library and from every command that reads runs, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.eval import ResultsFile, compare_runs
from envbuilder.eval._leaderboard import leaderboard_row
from envbuilder.eval._records import RECORD_VERSION, RunFileError

RUN = {
    "env": "square",
    "env_hash": "sha256:ab",
    "server": None,
    "split": "test",
    "limit": 2,
    "model": "m",
    "endpoint": "http://127.0.0.1:9/v1",
    "sampling": {"temperature": 0.0},
    "samples": 1,
    "max_turns": 4,
    "answer": "tool",
}
H1 = {"run": RUN, "run_id": "r1"}


def episode(i: int, score: float, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": "r1", "env": "square", "split": "test", "index": i, "sample": 0, "model": "m",
        "task": {"id": i}, "task_id": str(i), "status": "finished", "reward": score,
        "finished": True, "metadata": None, "turns": 1, "usage": {"prompt_tokens": 3},
        "messages": [{"role": "user", "content": "q"}], "tool_calls": [], "error": None,
        "error_reason": None, "ungradeable": False, "correct": score >= 1, "duration_s": 0.1, **extra,
    }  # fmt: skip


def write(path: Path, header: dict[str, Any], *lines: Any, tail: str = "") -> Path:
    text = "".join(json.dumps(x) + "\n" for x in (header, *lines))
    path.write_text(text + tail)
    return path


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_file_without_versions_reads_as_version_1(tmp_path: Path) -> None:
    # Today's shape as every earlier envbuilder wrote it: no `version` anywhere.
    old = write(tmp_path / "old.jsonl", {"run": RUN, "run_id": "r1", "started": "2026-01-01T00:00:00"},
                episode(0, 1.0), episode(1, 0.0))  # fmt: skip
    header, records = ResultsFile(old).load()
    assert header.version == 1 and header.run.model == "m" and header.run.max_turns == 4
    assert header.to_dict() == {"run": RUN, "run_id": "r1", "started": "2026-01-01T00:00:00"}
    assert [r["reward"] for r in records] == [1.0, 0.0]
    # An older header lacking a later field takes that field's default.
    lean = {k: v for k, v in RUN.items() if k not in ("answer", "samples")}
    write(old, {"run": lean, "run_id": "r1"}, episode(0, 1.0))
    header, _ = ResultsFile(old).load()
    assert (header.run.answer, header.run.samples) == ("tool", 1)


def test_a_newer_version_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = write(tmp_path / "new.jsonl", {"version": RECORD_VERSION + 1, "run": RUN, "run_id": "r1"})
    with pytest.raises(RunFileError) as err:
        ResultsFile(path).load()
    assert f"{path}:1: record version {RECORD_VERSION + 1} is newer" in str(err.value)
    assert err.value.hint == "Upgrade envbuilder to read this run"


@pytest.mark.parametrize(
    ("lines", "where"),
    [
        # a header field of the wrong type
        ([{"run": {**RUN, "samples": "many"}, "run_id": "r1"}], ":1: run.samples: "),
        ([{"run": {**RUN, "model": None}, "run_id": "r1"}], ":1: run.model: "),
        ([{"run": RUN}], ":1: run_id: Field required"),
        # an episode line that is not a record
        ([H1, episode(0, 1.0), ["not", "a", "record"]], ":3: expected a JSON object"),
        ([H1, episode(0, 1.0, index=-2)], ":2: index: "),
        ([H1, episode(0, 1.0, reward="high")], ":2: reward: "),
        ([H1, episode(0, 1.0, tool_calls=[1, 2])], ":2: tool_calls.0: "),
        ([H1, {k: v for k, v in episode(0, 1.0).items() if k != "split"}],
         ":2: split: Field required"),
    ],
)  # fmt: skip
def test_a_damaged_line_is_named_by_file_line_and_field(tmp_path: Path, lines: list[Any], where: str) -> None:
    path = write(tmp_path / "run.jsonl", *lines)
    with pytest.raises(RunFileError) as err:
        ResultsFile(path).load()
    assert str(err.value).startswith(f"{path}{where}")
    # Every command that reads runs says the same, with exit code 1 and no traceback.
    for args in (["view", str(path)], ["eval", "compare", str(path), str(path)]):
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert f"{path}{where}" in result.output and "Traceback" not in result.output


def test_a_torn_last_line_is_skipped_but_a_damaged_middle_line_is_an_error(tmp_path: Path) -> None:
    torn = '{"run_id": "r1", "spl'
    path = write(tmp_path / "run.jsonl", H1, episode(0, 1.0), tail=torn)
    _, records = ResultsFile(path).load()  # a run killed mid-write
    assert len(records) == 1
    # The same fragment with a newline after it, and a record after that: damage, not a tear.
    path.write_text(path.read_text() + "\n" + json.dumps(episode(1, 0.0)) + "\n")
    with pytest.raises(RunFileError, match=r"run\.jsonl:3: not a JSON line"):
        ResultsFile(path).load()


def test_view_of_a_folder_names_a_damaged_run_and_skips_other_jsonl(tmp_path: Path) -> None:
    write(tmp_path / "good.jsonl", {"run": RUN, "run_id": "r1"}, episode(0, 1.0))
    (tmp_path / "notes.jsonl").write_text('{"some": "other data"}\n')  # not a run: left alone
    assert cli("view", str(tmp_path)).exit_code == 0
    bad = write(tmp_path / "bad.jsonl", {"run": {**RUN, "limit": "all"}, "run_id": "r2"})
    result = cli("view", str(tmp_path))
    assert result.exit_code == 1 and f"{bad}:1: run.limit: " in result.output
    assert "Traceback" not in result.output


def test_compare_reads_typed_headers(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", H1, episode(0, 0.0), episode(1, 0.0))
    head_b = {"version": 1, "run": {**RUN, "model": "n", "max_turns": 8}, "run_id": "r2"}
    b = write(tmp_path / "b.jsonl", head_b, episode(0, 1.0), episode(1, 1.0))
    c = compare_runs(a, b)
    assert (c.a.run.model, c.b.run.model, c.overall.tasks) == ("m", "n", 2)
    assert c.notes == ["the turn limits (--max-turns) differ: 4 (A), 8 (B)"]


def test_a_damaged_summary_is_named_for_the_catalog(tmp_path: Path) -> None:
    summary = {"run": RUN, "run_id": "r1", "finished": "2026-01-02T00:00:00",
               "summary": {"episodes": 2, "tasks": 2, "mean_reward_all": {"mean": 0.5, "ci95": [0.1, 0.9]},
                           "accuracy_graded": {"mean": 0.5}, "outcomes": {"error": 0}}}  # fmt: skip
    path = tmp_path / "r.summary.json"
    path.write_text(json.dumps(summary))
    row = leaderboard_row(path)
    assert (row["model"], row["score"], row["ci95"], row["date"]) == ("m", 0.5, [0.1, 0.9], "2026-01-02")
    summary["summary"]["mean_reward_all"] = {"mean": "half"}
    path.write_text(json.dumps(summary))
    with pytest.raises(RunFileError, match=r"r\.summary\.json:1: summary\.mean_reward_all\.mean: "):
        leaderboard_row(path)
