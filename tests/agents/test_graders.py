"""Agent graders: state_match replays the gold actions, actions and communicated read the calls
and messages; all compose with `all`."""

from __future__ import annotations

import json
from typing import Any

from envbuilder.authoring import gold_cases, run_cases
from envbuilder.environment import Environment, Episode
from envbuilder.graders import TRAJECTORY, GraderContext, Trajectory, build_grader
from envbuilder.graders._actions import ActionsConfig
from envbuilder.graders._state_match import StateMatchConfig
from envbuilder.protocol import RunToolSuccess
from tests.agents.conftest import bank_env

GOLD = [
    {"name": "find_account", "arguments": {"owner": "Bob"}},
    {"name": "unfreeze", "arguments": {"account": "a2"}},
    {"name": "transfer", "arguments": {"source": "a1", "target": "a2", "amount": 30}},
]


async def _play(env: Environment, calls: list[dict[str, Any]], message: str, index: int = 0) -> Any:
    episode = Episode(task=env.split("test").task(index))
    for call in calls:
        assert isinstance(await env.call_tool(episode, call["name"], call["arguments"]), RunToolSuccess)
    result = await env.call_tool(episode, "send_message", {"message": message})
    assert isinstance(result, RunToolSuccess)
    return result.output


async def test_the_gold_trajectory_scores_one_and_its_variations_zero(bank: Environment) -> None:
    assert (await _play(bank, GOLD, "Bob now has 35.")).reward == 1.0
    missing = await _play(bank, GOLD[:2], "Bob now has 35.")
    assert missing.reward == 0.0 and missing.finished
    state = missing.metadata["graders"][0]
    assert state["outcome"] == "incorrect" and "differs from the expected state" in state["reason"]
    wrong = [*GOLD[:2], {"name": "transfer", "arguments": {"source": "a1", "target": "a2", "amount": 31}}]
    assert (await _play(bank, wrong, "Bob now has 35.")).reward == 0.0
    assert (await _play(bank, GOLD, "All done.")).reward == 0.0  # the balance was not said
    # Another path to the same state is as good (the lookup is not required).
    other = [{"name": "get_account", "arguments": {"account": "a2"}}, *GOLD[1:]]
    assert (await _play(bank, other, "It is 35 now")).reward == 1.0


async def test_the_diff_names_paths_and_is_gold_kept_from_the_agent(bank: Environment) -> None:
    env = bank_env(replace=("- {type: state_match}", "- {type: state_match, paths: [accounts/a2]}"))
    episode = Episode(task=env.split("test").task(0))
    for call in GOLD[:2]:
        await env.call_tool(episode, call["name"], call["arguments"])
    assert env.submit is not None
    output = await env.submit.conclude(episode, "35")
    assert output.reward == 0.0
    assert '"diff"' not in json.dumps(output.metadata)  # gold values are not shown
    state_grader = env.submit.grader.children[0]  # type: ignore[attr-defined]
    own = await state_grader.grade("35", env.submit.context(episode, "35"), {})
    assert own.details["diff"] == [
        {"path": "accounts/a2/balance", "expected": 35, "got": 5},
        {"path": "accounts/a2/log", "expected": ["+30.0"], "got": []},
    ]


async def test_state_match_without_an_episode_is_ungradeable() -> None:
    grader = build_grader(StateMatchConfig(type="state_match"), GraderContext())
    grade = await grader.grade("x", {"actions": "[]"}, {})
    assert grade.outcome.value == "ungradeable" and "state" in grade.reason


async def test_actions_in_order_or_not_and_by_keys() -> None:
    def trajectory(*calls: tuple[str, dict[str, Any]], error: bool = False) -> Trajectory:
        return Trajectory(calls=[{"name": n, "input": a, "output": "", "error": error} for n, a in calls])

    gold = json.dumps([{"name": "a", "arguments": {"x": 1, "y": 2}}, {"name": "b", "arguments": {"z": "q"}}])
    exact = build_grader(ActionsConfig(type="actions"), GraderContext())
    ordered = build_grader(ActionsConfig(type="actions", ordered=True), GraderContext())
    by_key = build_grader(ActionsConfig(type="actions", keys={"a": ["x"]}, tools=["a"]), GraderContext())

    async def score(grader: Any, traj: Trajectory) -> float | None:
        return (await grader.grade("", {"actions": gold, TRAJECTORY: traj}, {})).score

    both = trajectory(("b", {"z": "q"}), ("a", {"x": 1, "y": 2}))
    assert await score(exact, both) == 1.0
    assert await score(ordered, both) == 0.0
    assert await score(ordered, trajectory(("a", {"x": 1, "y": 2}), ("c", {}), ("b", {"z": "q"}))) == 1.0
    assert await score(exact, trajectory(("a", {"x": 1, "y": 3}), ("b", {"z": "q"}))) == 0.0
    assert await score(by_key, trajectory(("a", {"x": 1, "y": 3}))) == 1.0
    assert await score(exact, trajectory(("a", {"x": 1, "y": 2}), ("b", {"z": "q"}), error=True)) == 0.0
    # One call cannot match two gold calls.
    twice = json.dumps([{"name": "a", "arguments": {}}, {"name": "a", "arguments": {}}])
    grade = await exact.grade("", {"actions": twice, TRAJECTORY: trajectory(("a", {}))}, {})
    assert grade.score == 0.0 and grade.details["missing"] == ["a"]


def test_check_replays_gold_actions_on_every_task() -> None:
    env = bank_env()
    results = run_cases(env, gold_cases(env, sample=100))
    assert [(r.case.label, r.reward, r.passed) for r in results] == [
        ("test[0]", 1.0, True),
        ("test[1]", 1.0, True),
    ]


async def test_a_judge_reads_the_agents_messages_beside_state_match() -> None:
    from tests.fakes.chat_server import ChatServer, completion

    with ChatServer(lambda body, i: (200, completion("CORRECT"), {})) as judge:
        env = bank_env(
            replace=(
                "- {type: communicated, info: tell}",
                "- type: llm_judge\n"
                f"      base_url: {judge.base_url}\n"
                "      model: judge\n"
                "      cache: false\n"
                "      template: >-\n"
                "        Did the agent say the new balance?"
                " {% for m in trajectory.messages %}[{{ m }}]{% endfor %} Calls:"
                " {{ trajectory.calls | map(attribute='name') | join(',') }}",
            )
        )
        output = await _play(env, GOLD, "Bob now has 35.")
        await env.aclose()
    assert output.reward == 1.0
    (request,) = judge.requests
    prompt = request["messages"][-1]["content"]
    assert "[Bob now has 35.]" in prompt and "Calls: find_account,unfreeze,transfer" in prompt
