"""In-process trainers' environments (no HTTP): TRL's factory and reward, SkyRL's registered
``BaseTextEnv`` on the real ``skyrl_gym``, and verl's ``compute_score`` and tool contracts."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
import skyrl_gym

import envbuilder.integrations
from envbuilder.authoring import gold_cases
from envbuilder.environment import load_environment
from envbuilder.episode import Episode, Reply, output_of
from envbuilder.graders import grade_off_loop
from envbuilder.inprocess import LocalEpisode
from envbuilder.integrations import skyrl, trl, verl
from envbuilder.integrations._local import describe
from envbuilder.protocol import RunToolError, ToolOutput, call_result
from envbuilder.threadloop import run_sync
from tests.conftest import ENVS

TOOLS = ENVS / "gsm8k_tools.yaml"


def _gold(split: str, index: int) -> str:
    return load_environment(ENVS / "gsm8k.yaml").split(split).task(index)["answer"].split("####")[-1].strip()


def test_public_api() -> None:
    assert envbuilder.integrations.__all__ == [
        "HarborExport", "LocalEpisode", "VerifiersPackage", "export_harbor", "export_verifiers"
    ]  # fmt: skip
    assert trl.__all__ == ["TRLEnvironment", "TRLSpec", "environment_class", "episode_reward", "served_spec"]
    assert skyrl.__all__ == [
        "ENV_ID", "EnvbuilderTextEnv", "chat_prompt", "dataset_rows", "parse_tool_call", "register"
    ]  # fmt: skip
    assert verl.__all__ == ["TOOL_CLASS", "SpecTool", "compute_score", "dataset_rows", "tool_config"]


# -- TRL ------------------------------------------------------------------------------------------


def test_trl_spec_binds_tools_like_trls_adapter_and_reads_the_episode_reward() -> None:
    spec = trl.TRLSpec(TOOLS, split="test", num_tasks=3)
    dataset = spec.train_dataset
    assert dataset.column_names == ["prompt", "task_index"] and len(dataset) == 3
    rollout = spec.environment_factory()
    signature = inspect.signature(rollout.calculator)
    assert list(signature.parameters) == ["expression"]
    assert signature.parameters["expression"].annotation is str
    assert "Args:\n        expression:" in (rollout.calculator.__doc__ or "")
    assert list(inspect.signature(rollout.hint).parameters) == []

    row = dataset[1]
    prompt = rollout.reset(**row)
    assert load_environment(ENVS / "gsm8k.yaml").split("test").task(1)["question"] in prompt
    assert rollout.calculator(expression="6*7").strip().endswith("42")
    assert rollout.hint().startswith("First step:")
    assert "Incorrect" in rollout.submit(answer="-1")
    assert spec.reward_funcs(environments=[rollout]) == [None]  # nothing final yet
    rollout.submit(answer=_gold("test", 1))
    assert spec.reward_funcs(environments=[rollout]) == [0.75]  # 1.0 less the hint
    assert rollout.finished and rollout.rewards == [None, None, None, 0.75]
    rollout.reset(task_index=0)  # a fresh episode per reset
    assert rollout.reward is None and rollout.rewards == []


# -- SkyRL ----------------------------------------------------------------------------------------


def test_skyrl_env_registered_and_stepped_through_skyrl_gym() -> None:
    env_id = skyrl.register("envbuilder-gsm8k-tools", spec=TOOLS)
    assert skyrl.register("envbuilder-gsm8k-tools", spec=TOOLS) == env_id  # idempotent
    rows = skyrl.dataset_rows(TOOLS, split="test", limit=2, env_id=env_id)
    assert [r["task_index"] for r in rows] == [0, 1] and rows[0]["env_class"] == env_id
    assert '"name": "calculator"' in rows[0]["prompt"][0]["content"]

    env = skyrl_gym.make(env_id, extras={"split": "test", "task_index": 1, "max_turns": 5})
    prompt, _ = env.init([])
    assert prompt[0]["role"] == "system" and prompt[-1]["role"] == "user"
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    first = env.step(f"I will compute. {call}")
    assert (first["done"], first["reward"]) == (False, 0.0)
    assert "42" in first["observations"][0]["content"]
    bad = env.step("<tool_call>{not json</tool_call>")
    assert "not JSON" in bad["observations"][0]["content"] and not bad["done"]
    wrong = env.step("The answer is -1.")  # a reply without a tool call is the answer
    assert (wrong["done"], wrong["reward"]) == (False, 0.0)  # an attempt is left
    last = env.step(f"The answer is {_gold('test', 1)}.")
    assert (last["done"], last["reward"]) == (True, 1.0)
    assert env.get_metrics() == {"turns": 4, "reward": 1.0, "graded": True, "void": False}
    env.close()


def test_skyrl_max_turns_end_an_episode_without_reward() -> None:
    env = skyrl.EnvbuilderTextEnv(
        extras={"spec": str(TOOLS), "split": "test", "task_index": 0, "max_turns": 2}
    )
    env.init([{"role": "user", "content": "prepared"}])
    call = '<tool_call>{"name": "hint", "arguments": {}}</tool_call>'
    outs = [env.step(call), env.step(call)]
    assert [o["done"] for o in outs] == [False, True] and [o["reward"] for o in outs] == [0.0, 0.0]
    assert "at most 1 time" in outs[1]["observations"][0]["content"]


def test_parse_tool_call() -> None:
    assert skyrl.parse_tool_call("no call") is None
    assert skyrl.parse_tool_call('<tool_call>{"name": "a", "arguments": {"x": 1}}') == {
        "name": "a", "arguments": {"x": 1}}  # fmt: skip
    assert skyrl.parse_tool_call('<tool_call>{"arguments": {}}</tool_call>') == 'the tool call needs a "name"'
    assert skyrl.parse_tool_call('<tool_call>{"name": "a", "arguments": 3}</tool_call>') == (
        '"arguments" must be an object'
    )


# -- verl -----------------------------------------------------------------------------------------


def test_verl_compute_score_uses_the_spec_grader_not_the_given_ground_truth() -> None:
    rows = verl.dataset_rows(ENVS / "gsm8k.yaml", split="test", limit=2)
    row = rows[1]
    assert row["data_source"] == "gsm8k" and row["prompt"][-1]["role"] == "user"
    assert "answer" not in json.dumps(row["extra_info"])  # no gold in the rows
    info = row["extra_info"]
    gold = _gold("test", 1)
    score = verl.compute_score(row["data_source"], f"So the answer is {gold}.", "999", info)
    assert score == {"score": 1.0, "graded": 1, "void": 0}
    assert verl.compute_score("gsm8k", "It is 999.", gold, info) == {"score": 0.0, "graded": 1, "void": 0}
    ungradeable = {"score": 0.0, "graded": 0, "void": 0}  # the answer's: not void
    assert verl.compute_score("gsm8k", "no idea", gold, info) == ungradeable
    with pytest.raises(ValueError, match="extra_info must name the spec"):
        verl.compute_score("gsm8k", "1", "1", {})


def test_verl_compute_score_on_every_gold_answer_of_math500() -> None:
    env = load_environment(ENVS / "math500.yaml")
    for case in gold_cases(env, sample=5):
        info = {"spec": str(ENVS / "math500.yaml"), "split": case.split, "index": case.index}
        assert verl.compute_score("math500", case.response or "", "", info)["score"] == 1.0


def test_verl_tool_config_and_tool_lifecycle() -> None:
    config = verl.tool_config(TOOLS)
    tools = {t["tool_schema"]["function"]["name"]: t for t in config["tools"]}
    assert set(tools) == {"calculator", "hint", "submit"}
    assert all(t["class_name"] == "envbuilder.integrations.verl.SpecTool" for t in tools.values())
    assert tools["calculator"]["tool_schema"]["function"]["parameters"]["required"] == ["expression"]
    json.dumps(config)  # plain data: written out as YAML for verl's tool_config_path

    def make(name: str) -> Any:
        return verl.SpecTool(tools[name]["config"], tools[name]["tool_schema"])

    rows = verl.dataset_rows(TOOLS, split="test", limit=1)
    create_kwargs = rows[0]["extra_info"]["tools_kwargs"]["submit"]["create_kwargs"]

    async def lifecycle() -> list[Any]:
        calc, submit = make("calculator"), make("submit")
        cid, _ = await calc.create(create_kwargs=create_kwargs)
        text, reward, _ = await calc.execute(cid, {"expression": "2+3"})
        await calc.release(cid)
        sid, _ = await submit.create("fixed-id", create_kwargs=create_kwargs)
        wrong = await submit.execute(sid, {"answer": "-1"})
        right = await submit.execute(sid, {"answer": _gold("test", 0)})
        final = await submit.calc_reward(sid)
        await submit.release(sid)
        return [text, reward, sid, wrong[1], right[1], right[2], final]

    text, reward, sid, wrong, right, meta, final = asyncio.run(lifecycle())
    assert (text.strip().endswith("5"), reward, sid) == (True, 0.0, "fixed-id")
    assert (wrong, right, meta, final) == (0.0, 1.0, {"finished": True}, 1.0)


# -- the answer path: no task until it waits, the submit tool's chain in one frame ----------------


@pytest.mark.parametrize("name", ["gsm8k.yaml", "math500.yaml", "mmlu_stem.yaml", "digits.yaml"])
def test_an_answer_in_process_is_graded_and_reported_as_the_whole_chain_does_it(name: str) -> None:
    env = load_environment(ENVS / name)
    submit = env.submit
    assert submit is not None
    field = submit.spec.answer_field
    assert env.toolbox.taskless == {submit.spec.name}  # its grader says it needs no task

    async def reference(task: dict[str, Any], tool_input: Any) -> ToolOutput | RunToolError:
        assert asyncio.current_task() is not None  # the whole chain, in a task, as before
        state = Episode(task=task)
        answer = submit.answer_of(tool_input)  # through the input model
        if isinstance(answer, RunToolError):
            return answer
        grade = await grade_off_loop(submit.grader, answer, submit.context(state, answer), {})
        return submit.output(state, grade, answer)

    too_long = "9" * (submit.spec.max_answer_chars + 1)
    for case in gold_cases(env, sample=3):
        task = env.split(case.split).task(case.index)
        for tool_input in (
            {field: case.response or ""},
            {field: "42"},
            {field: ""},
            {field: too_long},
            {field: 7},
        ):
            out = LocalEpisode(env, task).call(submit.spec.name, tool_input)
            expected = run_sync(reference(task, tool_input))
            assert out == expected, (case, tool_input)
            assert out.model_dump_json() == expected.model_dump_json()


def test_a_grader_that_does_not_say_it_is_task_free_grades_in_a_task() -> None:
    env = load_environment(ENVS / "gsm8k.yaml")  # (its own copy: the grader is changed below)
    assert env.submit is not None
    grader = env.submit.grader
    grader.task_free = False  # what a plugin that says nothing gets
    plain = grader.grade
    tasks: list[asyncio.Task[Any] | None] = []

    async def grade(answer: str, task: dict[str, Any], secrets: dict[str, str]) -> Any:
        tasks.append(asyncio.current_task())
        async with asyncio.timeout(30):  # asks for the current task before any wait
            return await plain(answer, task, secrets)

    grader.grade = grade  # type: ignore[method-assign]
    assert env.toolbox.taskless == frozenset()
    out = LocalEpisode.of(env, "train", 0).call("submit", {"answer": _gold("train", 0)})
    assert isinstance(out, ToolOutput) and out.reward == 1.0
    assert isinstance(tasks[0], asyncio.Task)


@pytest.mark.parametrize("name", ["gsm8k.yaml", "math500.yaml", "gsm8k_tools.yaml"])
def test_the_answer_tool_in_process_gives_the_servers_bytes_and_leaves_its_episode(name: str) -> None:
    """``LocalEpisode.call`` and ``acall`` run the answer tool through ``Toolbox.answer`` (the
    output itself); the server's ``call_tool`` wraps the same for the wire. Over a sequence of
    calls (a refused input, a wrong answer, the right one, one after the end, and a call past
    the transcript's bound) each output is the wire result's, byte for byte, and the episodes
    are left the same (attempts, transcript, finished)."""
    env = load_environment(ENVS / name)
    submit = env.submit
    assert submit is not None
    answer, field = submit.spec.name, submit.spec.answer_field
    assert env.toolbox.answer_tool == answer
    case = gold_cases(env, sample=1)[0]
    task = env.split(case.split).task(case.index)
    inputs: list[Any] = [{field: 7}, {field: "-1", "ignored": 1}, {field: case.response or ""}, {field: "1"}]

    def played(prefill: int) -> list[Any]:
        sync, in_loop, served = LocalEpisode(env, task), LocalEpisode(env, task), Episode(task=task)
        stepped, astepped = LocalEpisode(env, task), LocalEpisode(env, task)  # (the adapters' way)
        entry = {"name": "x", "input": {}, "output": "", "error": False}
        for episode in (sync.state, in_loop.state, served, stepped.state, astepped.state):
            episode.transcript += [{"id": f"call_{i + 1}", **entry} for i in range(prefill)]
        replies = 0
        for tool_input in inputs:
            out = sync.call(answer, tool_input)
            assert run_sync(in_loop.acall(answer, tool_input)) == out
            wire = run_sync(env.call_tool(served, answer, tool_input))
            assert call_result(out) == wire and call_result(out).model_dump_json() == wire.model_dump_json()
            # step/astep: a graded answer as a Reply (no wire model), the same output once made one
            step, astep = stepped.step(answer, tool_input), run_sync(astepped.astep(answer, tool_input))
            assert step == astep and output_of(step) == out and describe(step) == describe(out)
            assert output_of(step).model_dump_json() == out.model_dump_json()  # type: ignore[union-attr]
            graded = isinstance(out, ToolOutput) and "outcome" in (out.metadata or {})
            assert isinstance(step, Reply) == graded  # (a refusal, the latch, the bound: as they are)
            replies += graded
        states = (sync.state, in_loop.state, stepped.state, astepped.state)
        assert all(s.to_dict() == served.to_dict() for s in states)
        assert sync.rewards == in_loop.rewards == stepped.rewards == astepped.rewards
        assert sync.void == stepped.void and sync.reward == stepped.reward
        assert replies == (0 if prefill else 1 + (submit.spec.max_attempts > 1))  # wrong, then right
        return sync.rewards

    rewards = played(0)
    assert rewards[0] is None and rewards[-1] is None and rewards.count(None) == 3  # one reward: the end's
    assert played(200) == [None] * 4  # the transcript's bound: the first call ends the episode
