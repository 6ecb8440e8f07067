"""End to end: both reference clients play the generated (`envs/reasoning_mix.yaml`) and mixed
(`envs/math_mix.yaml`) environments with the right rewards; the same index is the same task on a
restarted server and on two replicas sharing a Redis store."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.balancer import RoundRobin
from tests.conftest import ENVS
from tests.processes import serve_process
from tests.servers import serve_app

pytest.importorskip("reasoning_gym")


@pytest.fixture(scope="module")
def reasoning() -> Environment:
    return load_environment(ENVS / "reasoning_mix.yaml")


@pytest.fixture(scope="module")
def mix() -> Environment:
    return load_environment(ENVS / "math_mix.yaml")


@pytest.fixture(scope="module")
def url(reasoning: Environment, mix: Environment) -> Iterator[str]:
    with serve_app(create_app([reasoning, mix], ServerSettings())) as base:
        yield base


@pytest.fixture(scope="module")
def mix_url(mix: Environment) -> Iterator[str]:
    # ors-sdk's /create by split and index names no environment: the server's first one is used.
    with serve_app(create_app([mix], ServerSettings())) as base:
        yield base


def _gold(env: Environment, split: str, index: int) -> str:
    """The reference answer of a task (GSM8K's is the number after `####`)."""
    return str(env.split(split).task(index)["answer"]).split("####")[-1].strip()


def _partial(env: Environment) -> tuple[str, int, str, float]:
    """A task whose family gives partial credit, an answer it gives it to, and the credit."""
    from envbuilder.data._reasoning_gym import family_dataset, rg_entry

    for level in ("easy", "medium", "hard"):
        view = env.split(level)
        for i in range(200):
            task = view.task(i)
            rg = task["rg"]
            answer = f"{task['answer']} and more"
            score = family_dataset(rg["family"], rg["config"], rg["seed"]).score_answer(answer, rg_entry(rg))
            if 0 < score < 1:
                return level, i, answer, score
    raise AssertionError("no family gave partial credit")


def _openreward(url: str):
    from openreward import EnvironmentsAPI

    return EnvironmentsAPI(base_url=url, api_key=None)


def test_ors_sdk_plays_generated_tasks_at_every_level(url: str, reasoning: Environment) -> None:
    from ors.client import ORS

    with ORS(base_url=url) as client:
        env = client.environment("reasoning_mix")
        assert env.num_tasks("train_hard") == 10**9 - 1000
        task = env.get_task("hard", 4)
        assert task.task_spec == reasoning.public(reasoning.split("hard").task(4))
        assert {"answer", "rg"}.isdisjoint(task.task_spec)  # the gold answer stays on the server
        assert task.task_spec["difficulty"] == "hard"
        families = set()
        for level in ("easy", "medium", "hard", "train_medium"):
            for i in range(6):
                families.add(reasoning.split(level).task(i)["family"])
                with env.session(split=level, index=i) as s:
                    assert reasoning.split(level).task(i)["question"] in s.get_prompt()[0].text
                    answer = _gold(reasoning, level, i) if i % 2 == 0 else "certainly wrong"
                    out = s.call_tool("submit", {"answer": answer})
                    assert out.finished and out.reward == (1.0 if i % 2 == 0 else 0.0)
        assert len(families) >= 3
        level, i, answer, score = _partial(reasoning)
        with env.session(split=level, index=i) as s:
            out = s.call_tool("submit", {"answer": answer})
            # The shipped spec pays full marks only (partial_credit: false): the family's credit
            # is reported, not paid.
            assert out.reward == 0.0 and out.metadata["family_score"] == pytest.approx(score)
        # A session made from a task the client holds is graded against the server's row,
        # in a split that is a slice of its level too.
        for split, i in (("medium", 2), ("train_hard", 10**9 - 1001)):
            task = env.get_task(split, i)
            with env.session(task=task) as s:
                assert s.call_tool("submit", {"answer": _gold(reasoning, split, i)}).reward == 1.0


def test_openreward_plays_generated_and_mixed_tasks(
    url: str, reasoning: Environment, mix: Environment
) -> None:
    api = _openreward(url)
    try:
        env = api.get(name="reasoning_mix", variant="reasoning_mix")
        for i in range(4):
            with env.session(split="easy", index=i) as s:
                assert s.get_messages()[0].role == "user"
                out = s.call_tool("submit", {"answer": f"<answer>{_gold(reasoning, 'easy', i)}</answer>"})
                assert (out.reward, out.finished) == (1.0, True)
        env = api.get(name="math_mix", variant="math_mix")
        sources = set()
        for i in range(12):
            sources.add(mix.split("test").task(i)["source"])
            with env.session(split="test", index=i) as s:
                right = i % 3 != 0
                answer = f"The answer is {_gold(mix, 'test', i) if right else '-987654'}."
                out = s.call_tool("submit", {"answer": answer})
                assert out.reward == (1.0 if right else 0.0)
        assert sources == {"gsm8k", "arithmetic_easy", "arithmetic_hard"}
    finally:
        close = getattr(api, "close", None)
        if close is not None:
            close()


def test_ors_sdk_plays_the_mixture_and_its_level_filter(mix_url: str, mix: Environment) -> None:
    from ors.client import ORS

    with ORS(base_url=mix_url) as client:
        env = client.environment("math_mix")
        tasks = env.get_task_range("generated_hard", 0, 20)
        assert {t.task_spec["difficulty"] for t in tasks} == {"hard"}
        assert {t.task_spec["source"] for t in tasks} == {"arithmetic_hard"}
        for i in (0, 1):
            with env.session(split="generated_hard", index=i) as s:
                out = s.call_tool("submit", {"answer": _gold(mix, "generated_hard", i)})
                assert out.reward == 1.0


PICKS = [("easy", 0), ("hard", 999), ("train_easy", 123_456_789), ("train_hard", 10**9 - 1001)]


def _tasks(base: str) -> list[dict]:
    with httpx.Client(base_url=base) as c:
        return [c.post("/reasoning_mix/task", json={"split": s, "index": i}).json()["task"] for s, i in PICKS]


def test_the_same_index_is_the_same_task_after_a_restart_and_on_two_replicas(
    redis_url: str, reasoning: Environment
) -> None:
    spec = str(ENVS / "reasoning_mix.yaml")
    # This process made its tasks before the servers started: each server is a restart.
    before = [reasoning.public(reasoning.split(s).task(i)) for s, i in PICKS]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(serve_process(spec, "--store", redis_url))[0] for _ in range(2)]
        assert _tasks(urls[0]) == _tasks(urls[1]) == before
        # Episodes whose requests alternate between the replicas are graded right.
        balancer = RoundRobin(urls)
        base = stack.enter_context(serve_app(balancer))
        from ors.client import ORS

        with ORS(base_url=base) as client:
            env = client.environment("reasoning_mix")
            rewards = []
            for s, i in PICKS:
                with env.session(split=s, index=i) as session:
                    session.get_prompt()
                    rewards.append(session.call_tool("submit", {"answer": _gold(reasoning, s, i)}).reward)
        assert rewards == [1.0] * len(PICKS)
        assert min(balancer.sent) >= len(PICKS)


def test_eval_groups_a_mixture_by_source(mix: Environment) -> None:
    """The eval runner, as a library, scores each source of the mixture apart."""
    import asyncio
    import json

    from envbuilder.eval import ChatModel, LocalBackend, plan_eval, run_eval, summarize
    from tests.fakes.chat_server import ChatServer, tool_call_reply

    golds = {t["question"]: _gold(mix, "test", i) for i, t in enumerate(mix.split("test").task_range(0, 30))}

    def handler(request: dict, _: int):
        prompt = json.dumps(request["messages"])
        question = next(q for q in golds if json.dumps(q)[1:-1] in prompt)
        # Right on GSM8K's problems, wrong on the generated ones.
        answer = golds[question] if not question.startswith("What is") else "-1"
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}

    async def run() -> dict:
        backend = LocalBackend(mix)
        with ChatServer(handler) as server:
            model = ChatModel(server.base_url, "m")
            try:
                plan = await plan_eval(backend, model, split="test", limit=30)
                records = await run_eval(backend, model, plan)
            finally:
                await model.aclose()
        return summarize(records, group_by="source").to_dict()["groups"]

    groups = asyncio.run(run())
    assert set(groups) == {"gsm8k", "arithmetic_easy", "arithmetic_hard"}
    assert groups["gsm8k"]["outcomes"]["correct"] == groups["gsm8k"]["episodes"] > 0
    assert groups["arithmetic_easy"]["outcomes"]["correct"] == 0
    assert groups["arithmetic_hard"]["outcomes"]["incorrect"] == groups["arithmetic_hard"]["episodes"] > 0
