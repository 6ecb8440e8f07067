"""``eval compare``: only tasks graded in both runs are paired; void and errored episodes are
left out (never scored 0) and said, and an outage is never "a real difference"."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from envbuilder.cli import app
from tests.eval.conftest import ARITHMETIC, arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply

JUDGED = ARITHMETIC.replace(
    """grader:
  type: exact_match
  target: "{{{{ value }}}}"
  extract: number
""",
    """grader:
  type: llm_judge
  base_url: {judge}
  model: judge
  reference: "{{{{ value }}}}"
""",
)


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def closed_port_url() -> str:
    """A loopback URL nothing listens on (an endpoint that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def model(errors_on: set[int] = frozenset()):  # type: ignore[assignment]
    """Right on every task; an HTTP 500 (an error episode) on the tasks ``What is N squared?``
    with N in ``errors_on``."""

    def handler(req: dict[str, Any], i: int):
        found = re.search(r"What is (\d+) squared", prompt_of(req))
        if found and int(found[1]) in errors_on:
            return 500, {"error": {"message": "overloaded"}}, {}
        return 200, tool_call_reply("submit", json.dumps({"answer": arithmetic_answer(prompt_of(req))})), {}

    return handler


def judge(down: dict[str, set[str]]):
    """A judge that says CORRECT, or answers HTTP 400 (a void episode) when the reference it is
    given is in ``down["references"]``."""

    def handler(req: dict[str, Any], i: int):
        text = "\n".join(str(m.get("content")) for m in req["messages"])
        found = re.search(r"\[Reference answer\]\s*(\S+)", text)
        if found and found[1] in down["references"]:
            return 400, {"error": {"message": "judge down"}}, {}
        return 200, reply("VERDICT: CORRECT"), {}

    return handler


def judged_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A: 6 tasks, all graded correct. Run B: the same model, but the judge was down on 3
    tasks (void) and the model endpoint failed on 1 (error); the 2 others graded correct. What
    eval printed is beside each results file (``a.out``, ``b.out``)."""
    down: dict[str, set[str]] = {"references": set()}
    folder = tmp_path / "envs"
    write_arithmetic(folder, names=("square",))
    runs = tmp_path / "runs"
    with ChatServer(judge(down)) as judge_server:
        spec = folder / "square.yaml"
        spec.write_text(JUDGED.format(name="square", extra="", judge=judge_server.base_url))
        for name, errors_on in (("a", set()), ("b", {5})):
            if name == "b":
                down["references"] = {"4", "9", "16"}  # 2, 3 and 4 squared
            with ChatServer(model(errors_on)) as server:
                out = str(runs / f"{name}.jsonl")
                result = cli("eval", str(spec), "--model", "m", "--base-url", server.base_url,
                             "--max-retries", "0", "--no-cache", "--out", out)  # fmt: skip
            assert "ended" in result.output, result.output
            (runs / f"{name}.out").write_text(result.output)  # what eval printed
    return runs / "a.jsonl", runs / "b.jsonl"


def test_void_and_errored_episodes_are_left_out_not_scored_zero(tmp_path: Path) -> None:
    a, b = judged_runs(tmp_path)
    ran_b = cli("view", str(b))  # what eval itself reports for B: 3 void, 1 error
    assert ran_b.exit_code == 0, ran_b.output
    result = cli("eval", "compare", str(a), str(b), "--json")
    assert result.exit_code == 0, result.output
    c = json.loads(result.output)
    overall = c["overall"]
    assert (overall["tasks"], overall["a"], overall["b"], overall["significant"]) == (2, 1.0, 1.0, False)
    assert (c["ungraded_a"], c["ungraded_b"], c["unpaired"]) == ({}, {"void": 3, "error": 1}, 4)
    text = cli("eval", "compare", str(a), str(b)).output
    assert "left out: 3 void, 1 error episodes in B (not graded); 4 tasks not graded in both runs" in text
    assert "no difference distinguishable from 0 at 95% (paired over the 2 tasks graded in both runs)" in text
    # the other way round: the same tasks, A's side now
    c = json.loads(cli("eval", "compare", str(b), str(a), "--json").output)
    assert (c["overall"]["a"], c["overall"]["b"], c["ungraded_a"]) == (1.0, 1.0, {"void": 3, "error": 1})


def test_an_endpoint_outage_is_nothing_to_compare_never_a_real_difference(tmp_path: Path) -> None:
    folder = write_arithmetic(tmp_path / "envs", names=("square",))
    spec, runs = folder / "square.yaml", tmp_path / "runs"
    with ChatServer(model()) as server:
        assert cli("eval", str(spec), "--model", "m", "--base-url", server.base_url,
                   "--out", str(runs / "up.jsonl")).exit_code == 0  # fmt: skip
    down = cli("eval", str(spec), "--model", "m", "--base-url", closed_port_url(), "--max-retries", "0",
               "--out", str(runs / "down.jsonl"))  # fmt: skip
    assert "error 6" in down.output, down.output
    for a, b in (("up", "down"), ("down", "up")):
        result = cli("eval", "compare", str(runs / f"{a}.jsonl"), str(runs / f"{b}.jsonl"))
        assert result.exit_code == 1, result.output
        assert "real difference" not in result.output and "0.000" not in result.output
        assert "no task of the 6 both ran was graded in both, so there is nothing to compare" in result.output
        assert "down.jsonl: 6 error" in result.output and "up.jsonl: all graded" in result.output
