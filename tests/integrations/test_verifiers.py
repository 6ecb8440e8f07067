"""verifiers, in process: a spec loaded by module name as verifiers' own ``load_environment``
does for ``vf-eval``, and real rollouts through the environment's ``evaluate`` with an OpenAI
client pointed at a scripted local chat-completions server (tool calls, correct, wrong and
plain-text answers), and the ``vf-eval`` command itself."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import verifiers as vf
from openai import AsyncOpenAI

from envbuilder.environment import load_environment
from envbuilder.integrations import verifiers as vf_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply, tool_call_reply

MODULE = "envbuilder.integrations.verifiers"


def _golds(spec: str, n: int) -> dict[str, str]:
    """Each test task's question -> its gold number (the script's knowledge, not the agent's)."""
    split = load_environment(ENVS / spec).split("test")
    rows = [split.task(i) for i in range(n)]
    return {r["question"]: r["answer"].split("####")[-1].strip() for r in rows}


def _question(request: dict[str, Any], golds: dict[str, str]) -> str:
    text = json.dumps(request["messages"])
    return next(q for q in golds if json.dumps(q)[1:-1] in text)


def _evaluate(env: Any, handler: Any, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async def run(base_url: str) -> Any:
        async with AsyncOpenAI(base_url=base_url, api_key="sk-local") as openai:
            client = vf.OpenAIChatCompletionsClient(openai)
            quiet = lambda *a, **k: None  # noqa: E731
            return await env.evaluate(client, "scripted", num_examples=n, on_progress=quiet)

    with ChatServer(handler) as server:
        results = asyncio.run(run(server.base_url))
        requests = list(server.requests)
    outputs = sorted(results["outputs"], key=lambda o: o["example_id"])
    return outputs, requests


def test_public_api() -> None:
    assert vf_spec.__all__ == ["SpecEnv", "load_environment", "load_exported"]


def test_loaded_by_name_with_the_spec_dataset_tools_and_no_gold() -> None:
    env = vf.load_environment(MODULE, spec=str(ENVS / "gsm8k_tools.yaml"), split="test", num_tasks=3)
    assert isinstance(env, vf_spec.SpecEnv) and isinstance(env, vf.MultiTurnEnv)
    assert {t.name for t in env.tool_defs} == {"calculator", "hint", "submit"}
    calculator = next(t for t in env.tool_defs if t.name == "calculator")
    assert calculator.parameters["required"] == ["expression"]
    dataset = env.get_eval_dataset()
    assert len(dataset) == 3 and set(dataset["answer"]) == {""}
    golds = _golds("gsm8k_tools.yaml", 3)
    for row, question in zip(dataset, golds, strict=True):
        assert question in row["prompt"][-1]["content"]
        assert "####" not in json.dumps(row)  # the gold field never reaches the dataset


def test_rollouts_with_tools_correct_and_wrong_answers() -> None:
    env = vf_spec.load_environment(ENVS / "gsm8k_tools.yaml", split="test", num_tasks=2)
    golds = _golds("gsm8k_tools.yaml", 2)
    wrong = list(golds)[1]

    def handler(request: dict[str, Any], _: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        question = _question(request, golds)
        tool_turns = [m for m in request["messages"] if m["role"] == "tool"]
        if not tool_turns:
            return 200, tool_call_reply("calculator", json.dumps({"expression": "6*7"})), {}
        answer = "-1" if question == wrong else golds[question]
        return 200, tool_call_reply("submit", json.dumps({"answer": answer}), f"call_{len(tool_turns)}"), {}

    outputs, requests = _evaluate(env, handler, 2)
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"calculator", "hint", "submit"}
    right, bad = outputs
    assert right["reward"] == 1.0 and right["metrics"]["graded"] == 1.0
    assert "42" in right["completion"][1]["content"]  # the calculator ran in the episode
    assert "Correct" in right["completion"][-1]["content"]  # the submit's reply ends the rollout
    # a wrong attempt leaves one more (gsm8k-tools allows 2): the script answers wrong again
    assert bad["reward"] == 0.0 and bad["metrics"]["graded"] == 1.0
    assert "Incorrect" in bad["completion"][-1]["content"]


def test_a_reply_without_a_tool_call_is_submitted_as_the_answer() -> None:
    env = vf_spec.load_environment(ENVS / "gsm8k.yaml", split="test", num_tasks=3)
    golds = _golds("gsm8k.yaml", 3)
    questions = list(golds)
    answers = {
        questions[0]: f"The answer is {golds[questions[0]]}.",
        questions[1]: "The answer is 999999.",
        questions[2]: "I cannot tell.",
    }

    def handler(request: dict[str, Any], _: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        return 200, reply(answers[_question(request, golds)]), {}

    outputs, _ = _evaluate(env, handler, 3)
    assert [o["reward"] for o in outputs] == [1.0, 0.0, 0.0]
    assert [o["metrics"]["graded"] for o in outputs] == [1.0, 1.0, 0.0]  # the last is ungradeable


def test_vf_eval_loads_the_spec_by_module_name(tmp_path: Path) -> None:
    """verifiers' own CLI, as a user runs it, against the local endpoint."""
    golds = _golds("gsm8k.yaml", 2)
    first = next(iter(golds))
    assert len(set(golds.values())) == 2

    def handler(request: dict[str, Any], _: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        return 200, reply(f"The answer is {golds[first]}."), {}  # right for task 0, wrong for 1

    vf_eval = Path(sys.executable).parent / "vf-eval"
    args = ["-a", json.dumps({"spec": str(ENVS / "gsm8k.yaml")}), "-m", "scripted", "-n", "2", "-r", "1"]
    env = dict(os.environ, OPENAI_API_KEY="sk-local", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    with ChatServer(handler) as server:
        done = subprocess.run(
            [str(vf_eval), MODULE, *args, "-b", server.base_url, "-o", str(tmp_path)],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    scores = done.stdout.split("episode_reward:", 1)[1].split("\n")[1]
    assert scores.strip() == "r1: [1.0, 0.0]"


def test_secrets_reach_every_episode_and_unknown_arguments_are_refused() -> None:
    env = vf_spec.load_environment(ENVS / "gsm8k.yaml", num_tasks=1, secrets={"OPENAI_API_KEY": "sk-x"})
    state: dict[str, Any] = {"info": {"task_index": 0}}
    asyncio.run(env.setup_state(state))
    assert state["envbuilder_episode"].state.secrets == {"OPENAI_API_KEY": "sk-x"}
    with pytest.raises(RuntimeError, match=r"unexpected keyword argument 'splitt'"):
        vf.load_environment(MODULE, spec=str(ENVS / "gsm8k.yaml"), splitt="test")
