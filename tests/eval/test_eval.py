"""``envbuilder eval`` against a scripted chat-completions server: the score the policy implies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import Environment
from envbuilder.eval import ChatModel, LocalBackend, RemoteBackend, plan_eval, run_eval
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, tool_call_reply
from tests.servers import serve_app

N = 6
KEY = "sk-test-must-never-leak-1234"


@pytest.fixture(scope="module")
def answers(gsm8k: Environment) -> dict[str, tuple[int, str]]:
    """question → (index, gold answer), from the GSM8K test split's data."""
    tasks = gsm8k.split("test").task_range(0, N)
    return {t["question"]: (i, t["answer"].split("####")[-1].strip()) for i, t in enumerate(tasks)}


def _question(request: dict[str, Any], answers: dict[str, tuple[int, str]]) -> tuple[int, str]:
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return next(v for q, v in answers.items() if q in prompt)


def _tool_turns(request: dict[str, Any]) -> int:
    return sum(1 for m in request["messages"] if m["role"] == "tool")


def right(answers):
    def handler(req: dict[str, Any], i: int):
        _, gold = _question(req, answers)
        return 200, tool_call_reply("submit", json.dumps({"answer": gold})), {}
    return handler


def wrong(answers):
    return lambda req, i: (200, tool_call_reply("submit", '{"answer": "-987654"}'), {})


def even_right(answers):
    def handler(req: dict[str, Any], i: int):
        index, gold = _question(req, answers)
        answer = gold if index % 2 == 0 else "-1"
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}
    return handler


def malformed_then_right(answers):
    def handler(req: dict[str, Any], i: int):
        if _tool_turns(req) == 0:
            return 200, tool_call_reply("submit", '{"answer": 12'), {}
        return right(answers)(req, i)
    return handler


def always_malformed(answers):
    return lambda req, i: (200, tool_call_reply("submit", "not json at all"), {})


def rate_limited_then_right(answers):
    seen: set[int] = set()

    def handler(req: dict[str, Any], i: int):
        index, _ = _question(req, answers)
        if index not in seen:
            seen.add(index)
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}
        return right(answers)(req, i)
    return handler


def _run(env_or_url: Environment | str, handler, *, out: Path | None = None, limit: int = N,
         concurrency: int = 3, max_turns: int = 3, max_retries: int = 3):
    async def main():
        if isinstance(env_or_url, str):
            backend = await RemoteBackend.connect(env_or_url)
        else:
            backend = LocalBackend(env_or_url)
        with ChatServer(handler) as server:
            model = ChatModel(server.base_url, "fake-model", api_key=KEY, max_retries=max_retries,
                              backoff=0.01)
            try:
                plan = await plan_eval(backend, split="test", limit=limit, out=out)
                summary, records = await run_eval(backend, model, plan, concurrency=concurrency,
                                                  max_turns=max_turns, out=out)
            finally:
                await model.aclose()
                await backend.aclose()
        return summary, records, server
    return asyncio.run(main())


@pytest.mark.parametrize(
    ("policy", "accuracy", "turns"),
    [(right, 1.0, N), (wrong, 0.0, N), (even_right, 0.5, N), (malformed_then_right, 1.0, 2 * N),
     (rate_limited_then_right, 1.0, N)],
)
def test_in_process_accuracy_is_what_the_policy_implies(gsm8k, answers, policy, accuracy, turns) -> None:
    summary, records, server = _run(gsm8k, policy(answers))
    assert (summary.tasks, summary.accuracy, summary.errors, summary.ungradeable) == (N, accuracy, 0, 0)
    assert summary.mean_reward == pytest.approx(accuracy)
    assert summary.turns == turns
    assert summary.prompt_tokens == 10 * turns and summary.completion_tokens == 5 * turns
    assert sorted(r["index"] for r in records) == list(range(N))
    first = server.requests[0]
    assert first["model"] == "fake-model"
    assert first["tools"] == [{"type": "function", "function": {
        "name": "submit", "description": "Submit your final answer to the math problem (a number).",
        "parameters": {"type": "object", "required": ["answer"], "properties": {
            "answer": {"type": "string", "description": "The final numeric answer, e.g. 72.",
                       "maxLength": 100000}}}}}]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in server.headers_seen)


def test_even_right_standard_error(gsm8k, answers) -> None:
    summary, _, _ = _run(gsm8k, even_right(answers))
    # rewards 1,0,1,0,1,0: sample variance 0.3, s.e. sqrt(0.3 / 6)
    assert summary.stderr == pytest.approx((0.3 / 6) ** 0.5)


def test_trajectory_records_everything(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    _run(gsm8k, malformed_then_right(answers), out=out, limit=2)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2
    rec = next(r for r in lines if r["index"] == 0)
    assert (rec["env"], rec["split"], rec["task_id"]) == ("gsm8k", "test", "test-0")
    assert rec["model"] == "fake-model"
    assert (rec["status"], rec["reward"], rec["correct"], rec["finished"], rec["turns"]) == (
        "finished", 1.0, True, True, 2)
    assert rec["metadata"]["outcome"] == "correct"
    assert [m["role"] for m in rec["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    bad, good = rec["tool_calls"]
    assert "not a JSON object" in bad["error"] and "result" not in bad
    assert good["result"]["ok"] is True and good["result"]["output"]["reward"] == 1.0
    assert rec["messages"][2]["content"].startswith("Error: the arguments of 'submit'")
    assert rec["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    assert KEY not in out.read_text()


def test_turn_limit_and_malformed_calls_never_crash(gsm8k, answers) -> None:
    summary, records, _ = _run(gsm8k, always_malformed(answers), max_turns=2)
    assert (summary.accuracy, summary.errors, summary.turns) == (0.0, 0, 2 * N)
    assert {r["status"] for r in records} == {"max_turns"}
    assert all(r["reward"] is None and not r["finished"] for r in records)


def test_model_errors_are_per_episode_and_bounded(gsm8k, answers) -> None:
    forever_429 = lambda req, i: (429, {"error": {"message": "quota"}}, {"Retry-After": "0"})  # noqa: E731
    summary, records, server = _run(gsm8k, forever_429, limit=2, max_retries=2)
    assert (summary.tasks, summary.errors, summary.accuracy) == (2, 2, None)
    assert len(server.requests) == 2 * 3  # one try and two retries per episode, then give up
    assert all("HTTP 429" in r["error"] and KEY not in r["error"] for r in records)
    bad_request = lambda req, i: (400, {"error": {"message": "bad"}}, {})  # noqa: E731
    summary, _, server = _run(gsm8k, bad_request, limit=2)
    assert summary.errors == 2 and len(server.requests) == 2  # a 400 is not retried


def test_rerun_resumes_where_it_stopped(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    _, _, first = _run(gsm8k, right(answers), out=out, limit=3)
    assert len(first.requests) == 3
    summary, _, second = _run(gsm8k, right(answers), out=out, limit=N)
    assert len(second.requests) == N - 3  # only the three episodes not yet in the file
    assert summary.tasks == N and summary.accuracy == 1.0
    _, _, third = _run(gsm8k, right(answers), out=out, limit=N)
    assert third.requests == []
    assert len(out.read_text().splitlines()) == N


def test_errored_episodes_are_retried_on_rerun(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    summary, _, _ = _run(gsm8k, lambda req, i: (500, {}, {}), out=out, limit=2, max_retries=0)
    assert summary.errors == 2
    summary, _, server = _run(gsm8k, right(answers), out=out, limit=2)
    assert (len(server.requests), summary.errors, summary.accuracy) == (2, 0, 1.0)


def test_remote_server_gives_the_same_score(gsm8k_url, answers) -> None:
    summary, records, _ = _run(gsm8k_url, even_right(answers))
    assert (summary.tasks, summary.accuracy, summary.errors) == (N, 0.5, 0)
    assert {r["env"] for r in records} == {"gsm8k"}
    assert records[0]["task_id"] == "test-0"


def test_remote_sessions_are_deleted(gsm8k, answers) -> None:
    app = create_app([gsm8k], ServerSettings())
    with serve_app(app) as url:
        summary, _, _ = _run(url, right(answers), limit=4, concurrency=4)
        assert summary.accuracy == 1.0
        assert len(app.state.ors.sessions) == 0


def test_cli_in_process_prints_the_table(answers, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    out = tmp_path / "r.jsonl"
    with ChatServer(even_right(answers)) as server:
        result = CliRunner().invoke(app, [
            "eval", str(ENVS / "gsm8k.yaml"), "--model", "m", "--base-url", server.base_url,
            "--api-key-env", "FAKE_KEY", "--limit", "4", "--concurrency", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "gsm8k/test: 4 tasks" in result.output
    assert "50.0%" in result.output and "0.500 ± 0.289" in result.output
    assert KEY not in result.output and KEY not in out.read_text()
    assert server.headers_seen[0]["authorization"] == f"Bearer {KEY}"
    with ChatServer(even_right(answers)) as server:
        again = CliRunner().invoke(app, [
            "eval", str(ENVS / "gsm8k.yaml"), "--model", "m", "--base-url", server.base_url,
            "--limit", "4", "--out", str(out)])
    assert "4 already in" in again.output and server.requests == []


def test_cli_against_a_url(gsm8k_url, answers) -> None:
    with ChatServer(right(answers)) as server:
        result = CliRunner().invoke(app, [
            "eval", gsm8k_url, "--model", "m", "--base-url", server.base_url, "--limit", "3",
            "--env", "gsm8k"])
    assert result.exit_code == 0, result.output
    assert "100.0%" in result.output


def test_cli_unknown_split_is_an_error_not_a_traceback(answers) -> None:
    result = CliRunner().invoke(app, ["eval", str(ENVS / "gsm8k.yaml"), "--model", "m",
                                      "--base-url", "http://127.0.0.1:9/v1", "--split", "tset"])
    assert result.exit_code == 1
    assert "unknown split 'tset'" in result.output and "Traceback" not in result.output
