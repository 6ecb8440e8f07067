"""``envbuilder eval regrade RUN --spec NEW``: stored answers re-graded under a fixed spec, no model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from tests.eval.conftest import arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A run of 6 tasks graded by a buggy spec (its target is off by one: every right answer is
    scored wrong), the fixed spec, and a spec that serves other tasks. Task n=7 never answers."""
    folder = write_arithmetic(tmp_path / "envs", names=("square",))
    fixed = folder / "square.yaml"
    buggy = folder / "buggy.yaml"
    buggy.write_text(fixed.read_text().replace('target: "{{ value }}"', 'target: "{{ value }}1"'))

    def handler(req: dict[str, Any], i: int):
        prompt = prompt_of(req)
        if "What is 7 " in prompt:
            return 200, reply("no idea"), {}
        answer = arithmetic_answer(prompt, lambda kind, n: n == 2)  # wrong on n=2 (answers 5)
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}

    out = tmp_path / "run.jsonl"
    with ChatServer(handler) as server:
        result = cli("eval", str(buggy), "--model", "m", "--base-url", server.base_url, "--max-turns", "2",
                     "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "correct 0, incorrect 5, ungradeable 0, void 0, no answer 1" in result.output
    other = folder / "other.yaml"
    other.write_text(
        fixed.read_text()
        .replace("What is", "Compute: what is")
        .replace("test: data/square.parquet", "test: data/other.parquet")
    )
    import pyarrow as pa
    import pyarrow.parquet as pq

    ns = list(range(12, 18))  # the same number of tasks, other questions
    pq.write_table(pa.table({"n": ns, "value": [str(n * n) for n in ns], "parity": ["x"] * 6}),
                   folder / "data" / "other.parquet")  # fmt: skip
    return out, fixed, other


def test_regrade_with_the_fixed_spec(stored: tuple[Path, Path, Path], tmp_path: Path) -> None:
    out, fixed, _ = stored
    new = tmp_path / "fixed.jsonl"
    result = cli("eval", "regrade", str(out), "--spec", str(fixed), "--out", str(new))
    assert result.exit_code == 0, result.output
    assert f"envbuilder: replayed 6 of 6 episodes on {fixed} (no model calls)" in result.output
    assert "4 episode(s) changed" in result.output
    assert "incorrect (0)" in result.output and "correct (1)" in result.output
    data = json.loads(
        cli("eval", "regrade", str(out), "--spec", str(fixed), "--out", str(new), "--json").output
    )
    changed = {c["index"]: (c["before"]["outcome"], c["after"]["outcome"]) for c in data["changes"]}
    # n = 3, 4, 5, 6 were answered right: now correct; n = 2 stays wrong, n = 7 never answered
    assert changed == {i: ("incorrect", "correct") for i in (1, 2, 3, 4)}
    after = data["after"]["mean_reward_all"]
    assert after["mean"] == pytest.approx(4 / 6) and after["method"] == "wilson"
    assert 0 < after["ci95"][0] < 4 / 6 < after["ci95"][1] < 1
    assert data["before"]["mean_reward_all"]["mean"] == 0
    lines = [json.loads(x) for x in new.read_text().splitlines()]
    assert lines[0]["regraded_from"] == json.loads(out.read_text().splitlines()[0])["run_id"]
    assert lines[0]["run"]["env_hash"] != json.loads(out.read_text().splitlines()[0])["run"]["env_hash"]
    assert [r["correct"] for r in lines[1:]] == [False, True, True, True, True, False]
    assert cli("view", str(new)).exit_code == 0


def test_regrade_refuses_a_spec_with_other_tasks(stored: tuple[Path, Path, Path]) -> None:
    out, _, other = stored
    result = cli("eval", "regrade", str(out), "--spec", str(other))
    assert result.exit_code == 1
    assert "error: test[0] is another task in the new spec (n: 2 in the run, 12 now)" in result.output
    assert "Regrade only changes grading: the new spec must serve the same tasks" in result.output


def test_regrade_refuses_other_questions_behind_the_same_public_fields(
    stored: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    # A run records only the public fields (here: the id alone, once n is private too), so a
    # spec whose ids coincide passes the field comparison; the recorded conversation shows
    # that its questions are others
    out, fixed, _ = stored
    private = "  private: [n, value, parity]\n"
    hidden = fixed.parent / "hidden.yaml"
    hidden.write_text(fixed.read_text() + "task:\n" + private)
    shifted = fixed.parent / "shifted.yaml"
    shifted.write_text(
        fixed.read_text().replace("What is {{ n }}", "What is {{ n + 10 }}") + "task:\n" + private
    )
    for spec in (hidden, shifted):
        assert "{{ n" in spec.read_text()
    # the same questions, whatever the run recorded of the task: regraded
    assert (
        cli("eval", "regrade", str(out), "--spec", str(hidden), "--out", str(tmp_path / "h.jsonl")).exit_code
        == 0
    )
    result = cli("eval", "regrade", str(out), "--spec", str(shifted), "--out", str(tmp_path / "s.jsonl"))
    assert result.exit_code == 1, result.output
    assert "error: test[0] asks another question in the new spec" in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_regrade_never_overwrites_the_run(stored: tuple[Path, Path, Path]) -> None:
    out, fixed, _ = stored
    result = cli("eval", "regrade", str(out), "--spec", str(fixed), "--out", str(out))
    assert result.exit_code == 1 and "would overwrite the stored one" in result.output


def test_a_text_mode_run_is_regraded_from_its_final_messages(tmp_path: Path) -> None:
    """Answers given as plain text are replayed as what was submitted: the final messages."""
    folder = write_arithmetic(tmp_path / "envs", names=("cube",))
    fixed = folder / "cube.yaml"
    strict = folder / "strict.yaml"
    strict.write_text(fixed.read_text().replace("  extract: number\n", "  extract: none\n"))

    def handler(req: dict[str, Any], i: int):
        return 200, reply(f"It is {arithmetic_answer(prompt_of(req))}."), {}

    out = tmp_path / "text.jsonl"
    with ChatServer(handler) as server:
        result = cli("eval", str(strict), "--answer", "text", "--model", "m", "--base-url", server.base_url,
                     "--limit", "4", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "correct 0, incorrect 4" in result.output  # the whole sentence is not the number
    data = json.loads(cli("eval", "regrade", str(out), "--spec", str(fixed), "--json").output)
    assert data["replayed"] == 4 and len(data["changes"]) == 4
    assert data["after"]["outcomes"]["correct"] == 4
    regraded = [json.loads(x) for x in (tmp_path / "text.regraded.jsonl").read_text().splitlines()]
    assert regraded[0]["run"]["answer"] == "text"
    assert regraded[1]["tool_calls"][0]["via"] == "text"
