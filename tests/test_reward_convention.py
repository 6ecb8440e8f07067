"""The one reward convention, generated over every shipped spec: for any sequence of tool calls
and answers, summing the step rewards (SkyRL), taking the last non-null one (TRL) and the
episode's reward are the same number, and that number is the last graded attempt's reward less
what the calls cost.

Sequences are drawn by Hypothesis: declared tools with generated inputs (valid and not), unknown
tools, the gold answer, wrong and empty answers, in any order, continued past the end."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from envbuilder.authoring import gold_cases
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.protocol import RunToolSuccess
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply

SPECS = sorted(ENVS.glob("*.yaml"))


def _judge(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Ratings that depend on the reply, and sometimes no verdict (ungradeable)."""
    text = body["messages"][-1]["content"]
    verdict = len(text) % 12
    return 200, reply("I cannot tell." if verdict == 11 else f"Fine.\nSCORE: {verdict}"), {}


@pytest.fixture(scope="module")
def judge() -> Iterator[ChatServer]:
    with ChatServer(_judge) as server:
        yield server


def _load(path: Path, judge: ChatServer) -> Environment:
    text = path.read_text().replace("https://api.openai.com/v1", judge.base_url)
    return Environment(parse_spec(text, file=path.name, base_dir=ENVS))


def _value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "integer":
        return st.integers(-5, 50)
    if kind == "number":
        return st.floats(-5, 50, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    return st.sampled_from(["6*7", "1/0", "2 + 2", "", "x", "100 - 58", "sqrt(16)"]) | st.text(max_size=12)


def _inputs(schema: dict[str, Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    props = (schema or {}).get("properties", {})
    valid = st.fixed_dictionaries({k: _value(v) for k, v in props.items()})
    return valid | st.dictionaries(st.sampled_from(["x", *props]), st.integers(), max_size=2)


def _actions(env: Environment, golds: list[str]) -> st.SearchStrategy[list[tuple[str, dict[str, Any]]]]:
    assert env.submit is not None
    submit, field = env.submit.spec.name, env.submit.spec.answer_field
    answers = st.sampled_from([*golds, "", "0", "-1", "The answer is 7.", "def f():\n    return 1"])
    answers = answers | st.text(max_size=20)
    calls = [st.tuples(st.just(submit), answers.map(lambda a: {field: a}))]
    for tool in env.task_tools_listing.tools:
        if tool.name != submit:
            calls.append(st.tuples(st.just(tool.name), _inputs(tool.input_schema)))
    calls.append(st.tuples(st.just("no_such_tool"), st.just({})))
    return st.lists(st.one_of(*calls), min_size=1, max_size=6)


def _run(
    loop: asyncio.AbstractEventLoop,
    env: Environment,
    episode: Episode,
    actions: list[tuple[str, dict[str, Any]]],
) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await env.call_tool(episode, name, args) for name, args in actions]
        finally:
            await env.end_session(episode)

    return loop.run_until_complete(go())


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_sum_last_and_episode_reward_agree(path: Path, judge: ChatServer) -> None:
    env = _load(path, judge)
    assert env.submit is not None
    cases = [c for c in gold_cases(env, sample=2) if c.response is not None]
    golds = [c.response for c in cases if c.response is not None]
    tasks = [env.split(c.split).task(c.index) for c in cases] or [env.split(next(iter(env.splits))).task(0)]
    costs = {name: d.config.cost for name, d in env.toolbox.declared.items()}
    secrets = {"OPENAI_API_KEY": "sk-test"}

    @settings(
        max_examples=12 if path.stem == "humaneval" else 30,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(task=st.sampled_from(tasks), actions=_actions(env, golds))
    def check(task: Any, actions: list[tuple[str, dict[str, Any]]]) -> None:
        note(repr(actions))
        episode = Episode(task=task, secrets=secrets)
        results = _run(loop, env, episode, actions)
        outputs = [r.output for r in results if isinstance(r, RunToolSuccess)]
        rewards = [o.reward for o in outputs]
        non_null = [r for r in rewards if r is not None]
        finishing = [o for o in outputs if o.finished]
        # At most one step carries a reward: the one that ends the episode.
        assert len(finishing) <= 1
        assert all(o.reward is None for o in outputs if not o.finished)
        episode_reward = finishing[0].reward if finishing else None
        summed = math.fsum(non_null) if non_null else None
        last = non_null[-1] if non_null else None
        assert summed == last == episode_reward, (rewards, episode_reward)
        # ... and it is the last graded attempt's reward less the cost of the calls that ran.
        if finishing and episode_reward is not None and finishing[0].metadata:
            meta = finishing[0].metadata
            charged = sum(
                costs.get(name, 0.0)
                for (name, _), result in zip(actions, results, strict=False)
                if isinstance(result, RunToolSuccess)
                and not (result.output.metadata or {}).get("error")  # a failed call is not charged
            )
            assert meta.get("cost", 0.0) == pytest.approx(charged)

    loop = asyncio.new_event_loop()  # one loop: the judge's connections live on it
    try:
        check()
    finally:
        loop.run_until_complete(env.aclose())
        loop.close()
