"""``envbuilder eval`` against a scripted chat-completions server: the score the policy implies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.eval import (
    ChatModel,
    LocalBackend,
    RemoteBackend,
    RunMismatch,
    Sampling,
    plan_eval,
    run_eval,
    summarize,
)
from envbuilder.retry import RetryPolicy
from envbuilder.server import ServerSettings, create_app
from tests.eval.conftest import KEY, N, question, right_first, right_when
from tests.fakes.chat_server import ChatServer, tool_call_reply
from tests.servers import serve_app


def right(answers):
    return right_when(answers, lambda i: True)


def malformed_then_right(answers):
    def handler(req: dict[str, Any], i: int):
        if not any(m["role"] == "tool" for m in req["messages"]):
            return 200, tool_call_reply("submit", '{"answer": 12'), {}
        return right(answers)(req, i)

    return handler


def rate_limited_then_right(answers):
    seen: set[int] = set()

    def handler(req: dict[str, Any], i: int):
        index, _ = question(req, answers)
        if index not in seen:
            seen.add(index)
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}
        return right(answers)(req, i)

    return handler


def never_submits(answers):
    return lambda req, i: (200, tool_call_reply("submit", "not json at all"), {})


def run(
    target: Environment | str,
    server: ChatServer,
    *,
    out: Path | None = None,
    limit: int = N,
    samples: int = 1,
    max_turns: int = 3,
    max_retries: int = 3,
    model: str = "fake-model",
    sampling: Sampling | None = None,
    concurrency: int = 3,
):
    """Plan and run an eval against ``server``; (plan, records)."""

    async def main():
        backend = await RemoteBackend.connect(target) if isinstance(target, str) else LocalBackend(target)
        chat = ChatModel(
            server.base_url,
            model,
            api_key=KEY,
            sampling=sampling,
            retry=RetryPolicy(max_retries=max_retries, backoff=0.01, repeat_safe=True),
        )
        try:
            plan = await plan_eval(
                backend, chat, split="test", limit=limit, samples=samples, max_turns=max_turns, out=out
            )
            return plan, await run_eval(backend, chat, plan, concurrency=concurrency)
        finally:
            await chat.aclose()
            await backend.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("policy", "accuracy", "turns"),
    [
        (right, 1.0, N),
        (lambda a: right_when(a, lambda i: False), 0.0, N),
        (lambda a: right_when(a, lambda i: i % 2 == 0), 0.5, N),
        (malformed_then_right, 1.0, 2 * N),
        (rate_limited_then_right, 1.0, N),
    ],
)
def test_accuracy_is_what_the_policy_implies(gsm8k, answers, policy, accuracy, turns) -> None:
    with ChatServer(policy(answers)) as server:
        _, records = run(gsm8k, server)
    s = summarize(records)
    assert (s.episodes, s.accuracy.mean, s.errors, s.outcomes["ungradeable"]) == (N, accuracy, 0, 0)
    assert s.reward_all.mean == pytest.approx(accuracy) and s.reward_graded.mean == pytest.approx(accuracy)
    assert s.turns == turns
    assert s.prompt_tokens == 10 * turns and s.completion_tokens == 5 * turns
    assert sorted(r["index"] for r in records) == list(range(N))
    first = server.requests[0]
    assert first["model"] == "fake-model"
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "submit",
                "description": "Submit your final answer to the math problem (a number).",
                "parameters": {
                    "type": "object",
                    "required": ["answer"],
                    "properties": {
                        "answer": {
                            "type": "string",
                            "description": "The final numeric answer, e.g. 72.",
                            "maxLength": 100000,
                        }
                    },
                },
            },
        }
    ]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in server.headers_seen)


def test_sampling_parameters_reach_the_endpoint_and_the_record(gsm8k, answers, tmp_path: Path) -> None:
    sampling = Sampling(
        temperature=0.7,
        top_p=0.9,
        max_tokens=256,
        seed=3,
        extra={"reasoning_effort": "low", "temperature": 2},
    )
    with ChatServer(right(answers)) as server:
        plan, _ = run(gsm8k, server, limit=1, sampling=sampling, out=tmp_path / "r.jsonl")
    body = server.requests[0]
    sent = [body[k] for k in ("temperature", "top_p", "max_tokens", "seed", "reasoning_effort")]
    assert sent == [0.7, 0.9, 256, 3, "low"]  # the named option wins over the same field in extra
    header = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert header["run"]["sampling"] == {
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 256,
        "seed": 3,
        "extra": {"reasoning_effort": "low", "temperature": 2},
    }
    assert header["run_id"] == plan.identity.run_id


def test_the_results_file_says_which_run_each_episode_belongs_to(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    with ChatServer(malformed_then_right(answers)) as server:
        plan, records = run(gsm8k, server, out=out, limit=2)
    assert all("messages" not in r and "tool_calls" not in r for r in records)  # on disk, not in memory
    header, *lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert header["run"] == {
        "env": "gsm8k",
        "env_hash": plan.identity.env_hash,
        "server": None,
        "split": "test",
        "limit": 2,
        "model": "fake-model",
        "endpoint": server.base_url,
        "samples": 1,
        "max_turns": 3,
        "answer": "tool",
        "sampling": {"temperature": None, "top_p": None, "max_tokens": None, "seed": None, "extra": {}},
    }
    assert plan.identity.env_hash.startswith("sha256:")
    assert {r["run_id"] for r in lines} == {header["run_id"]}
    rec = next(r for r in lines if r["index"] == 0)
    assert (rec["env"], rec["split"], rec["sample"], rec["task_id"]) == ("gsm8k", "test", 0, "test-0")
    assert rec["task"]["id"] == "test-0" and "question" not in rec["task"]  # longer than 200 chars
    assert (rec["status"], rec["reward"], rec["correct"], rec["finished"], rec["turns"]) == (
        "finished",
        1.0,
        True,
        True,
        2,
    )
    assert [m["role"] for m in rec["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    bad, good = rec["tool_calls"]
    assert "not a JSON object" in bad["error"] and "result" not in bad
    assert good["result"]["output"]["reward"] == 1.0
    assert KEY not in out.read_text()


def test_never_submitting_episodes_are_counted(gsm8k, answers) -> None:
    with ChatServer(never_submits(answers)) as server:
        _, records = run(gsm8k, server, max_turns=2)
    s = summarize(records)
    assert len(records) == N and {r["status"] for r in records} == {"max_turns"}
    none = {"correct": 0, "incorrect": 0, "ungradeable": 0, "void": 0}
    assert s.outcomes == {**none, "no_answer": N, "error": 0}
    assert (s.reward_all.mean, s.reward_all.n) == (0.0, N)  # over all episodes, none = 0
    assert (s.reward_graded.mean, s.reward_graded.n, s.accuracy.mean) == (None, 0, None)


def test_model_errors_are_per_episode_bounded_and_counted_by_reason(gsm8k, answers) -> None:
    quota = lambda req, i: (429, {"error": {"message": "quota"}}, {"Retry-After": "0"})  # noqa: E731
    with ChatServer(quota) as server:
        _, records = run(gsm8k, server, limit=2, max_retries=2)
    assert len(server.requests) == 2 * 3  # one try and two retries per episode, then give up
    s = summarize(records)
    assert (s.episodes, s.errors, s.errors_by_reason, s.accuracy.mean) == (2, 2, {"HTTP 429": 2}, None)
    assert all(r["error"].endswith("(gave up after 3 tries)") and KEY not in r["error"] for r in records)
    with ChatServer(lambda req, i: (400, {"error": {"message": "bad"}}, {})) as server:
        _, records = run(gsm8k, server, limit=2)
    assert len(server.requests) == 2  # a 400 is not retried
    assert summarize(records).errors_by_reason == {"HTTP 400": 2}


def test_resume_continues_exactly_the_run(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    with ChatServer(right(answers)) as server:
        run(gsm8k, server, out=out)
        lines = out.read_text().splitlines()
        out.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][:20])  # killed: 2 lost, 1 torn
        before = len(server.requests)
        _, records = run(gsm8k, server, out=out)
        assert len(server.requests) - before == 3
        assert summarize(records).accuracy.mean == 1.0 and len(records) == N
        before = len(server.requests)
        run(gsm8k, server, out=out)
        assert len(server.requests) == before


def test_resume_with_another_model_or_options_is_refused(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    with ChatServer(right(answers)) as server:
        run(gsm8k, server, out=out, limit=2)
        with pytest.raises(RunMismatch) as caught:
            run(gsm8k, server, out=out, limit=3, model="other-model", sampling=Sampling(temperature=1.0))
    run_id = json.loads(out.read_text().splitlines()[0])["run_id"]
    assert str(caught.value) == "\n".join(
        [
            f"{out} belongs to another run ({run_id}); it differs in:",
            "  --limit: 2 in the file, 3 now",
            '  --model: "fake-model" in the file, "other-model" now',
            "  --temperature: null in the file, 1.0 now",
            "Resume with the same options, or write this run to another --out",
        ]
    )
    assert len(out.read_text().splitlines()) == 3  # untouched


def test_errored_episodes_are_retried_on_resume(gsm8k, answers, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    with ChatServer(lambda req, i: (500, {}, {})) as server:
        _, records = run(gsm8k, server, out=out, limit=2, max_retries=0)
        assert summarize(records).errors == 2
        server.handler = right(answers)
        _, records = run(gsm8k, server, out=out, limit=2, max_retries=0)
    s = summarize(records)
    assert (len(server.requests), s.errors, s.accuracy.mean) == (4, 0, 1.0)


def test_samples_give_unbiased_pass_at_k_and_clustered_intervals(gsm8k, answers) -> None:
    # task i is right on i of its 4 samples
    with ChatServer(right_first(answers, {0: 0, 1: 1, 2: 2, 3: 3})) as server:
        _, records = run(gsm8k, server, limit=4, samples=4, concurrency=1)
    assert sorted((r["index"], r["sample"]) for r in records) == [(i, s) for i in range(4) for s in range(4)]
    s = summarize(records)
    # pass@k = mean over tasks of 1 - C(4-c, k) / C(4, k), by hand:
    assert s.pass_at == pytest.approx({1: 6 / 16, 2: (0 + 1 / 2 + 5 / 6 + 1) / 4, 4: 3 / 4})
    # task means 0, .25, .5, .75: clustered s.e. = sd(task means) / sqrt(4)
    assert s.reward_all.mean == pytest.approx(0.375)
    assert s.reward_all.stderr == pytest.approx((0.3125 / 3) ** 0.5 / 2)


def test_remote_server_gives_the_same_score_and_its_hash(gsm8k, gsm8k_url, answers) -> None:
    with ChatServer(right_when(answers, lambda i: i % 2 == 0)) as server:
        plan, records = run(gsm8k_url, server)
        local, _ = run(gsm8k, server, limit=1)
    assert summarize(records).accuracy.mean == 0.5
    assert plan.identity.server == gsm8k_url and plan.identity.env_hash == local.identity.env_hash
    assert records[0]["task_id"] == "test-0"


def test_remote_sessions_are_deleted(gsm8k, answers) -> None:
    app = create_app([gsm8k], ServerSettings())
    with serve_app(app) as url, ChatServer(right(answers)) as server:
        _, records = run(url, server, limit=4, concurrency=4)
        assert summarize(records).accuracy.mean == 1.0
        assert len(app.state.context.sessions) == 0


@pytest.mark.parametrize("where", ["in process", "served"])
def test_without_a_split_eval_plays_the_held_out_one_never_the_training_rows(tmp_path: Path, where) -> None:
    # An HF-shaped spec with no `test` split: train and validation. The first split is the
    # training one; eval must play validation (by its type), in process and through a server.
    for name in ("train", "validation"):
        rows = [{"question": f"{name}-{i}?", "answer": f"{name}-{i}"} for i in range(3)]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "hf_shaped.yaml"
    spec.write_text(
        "name: hf-shaped\n"
        "dataset: {type: jsonl, files: {train: train.jsonl, validation: validation.jsonl}}\n"
        "splits: {train: {type: train}, validation: {type: validation}}\n"
        'prompt: {template: "{{ question }}"}\n'
        'grader: {type: exact_match, target: "{{ answer }}"}\n'
    )
    env = load_environment(spec)

    def answer(req: dict[str, Any], i: int):
        prompt = next(m["content"] for m in req["messages"] if m["role"] == "user")
        return 200, tool_call_reply("submit", json.dumps({"answer": prompt.rstrip("?")})), {}

    async def main(url: str | None, chat_url: str):
        backend = await RemoteBackend.connect(url) if url else LocalBackend(env)
        chat = ChatModel(chat_url, "fake-model", retry=RetryPolicy(max_retries=0))
        try:
            plan = await plan_eval(backend, chat, split=None, limit=None)
            return plan, await run_eval(backend, chat, plan, concurrency=2)
        finally:
            await chat.aclose()
            await backend.aclose()

    with serve_app(create_app([env], ServerSettings())) as url, ChatServer(answer) as server:
        plan, records = asyncio.run(main(url if where == "served" else None, server.base_url))
        asked = [next(m["content"] for m in r["messages"] if m["role"] == "user") for r in server.requests]
    assert plan.identity.split == "validation" and {r["split"] for r in records} == {"validation"}
    assert sorted(asked) == ["validation-0?", "validation-1?", "validation-2?"]
    assert summarize(records).accuracy.mean == 1.0
