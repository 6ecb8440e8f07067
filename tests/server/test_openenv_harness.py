"""TRL's OpenEnv integration on the door: TRL 1.16's harness rollouts
(``trl.experimental.async_grpo.openenv_harness``) drive OpenEnv's ``openenv.core.harness``: a
``ResourceSessionFactory`` gives each rollout a session, ``MCPHarnessAdapter`` runs the
tool-calling loop with the trainer's model step, and the rollout's reward is the environment's.
Here the same pieces (``StepEnvSessionAdapter`` over the real ``GenericEnvClient``,
``MCPHarnessAdapter``, ``build_harness_rollout_func``, the TRL-compatible rollout function) play
the five specs through the door with a scripted model step: the gold rollout gets the full
reward, the wrong one 0. (TRL's own worker samples with vLLM and a tokenizer, which this machine
has not; the rollout loop it drives is this one.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.doors import FIVE, SECRETS, Play, full_reward, load, model, plays
from tests.fakes.chat_server import ChatServer
from tests.servers import serve_app

pytest.importorskip("openenv.core")
from openenv.core.env_server.mcp_types import Tool
from openenv.core.generic_client import GenericEnvClient
from openenv.core.harness import (
    HarnessRunLimits,
    MCPHarnessAdapter,
    ModelStepResult,
    ResourceSession,
    ResourceSessionFactory,
    StepEnvSessionAdapter,
    build_harness_rollout_func,
)
from openenv.core.llm_client import LLMResponse, ToolCall


@pytest.fixture(scope="module")
def models() -> Iterator[ChatServer]:
    with ChatServer(model) as server:
        yield server


class DoorSessions(ResourceSessionFactory):
    """One episode of the door per rollout; the task is the dataset row's ``split`` and ``index``."""

    def __init__(self, base: str):
        self.base = base
        listed = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
        self.tools = [
            Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
            for t in listed["result"]["tools"]
        ]

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> ResourceSession:
        return StepEnvSessionAdapter(
            GenericEnvClient(base_url=self.base),
            task=task,
            seed=seed,
            episode_id=episode_id,
            tool_specs=self.tools,
            action_builder=lambda name, args: {"type": "call_tool", "tool_name": name, "arguments": args},
            initial_messages_builder=lambda result, task: result.observation["messages"],
            reset_kwargs={"split": task["split"], "index": task["index"], "secrets": SECRETS},
        )


def _model_steps(scripts: list[Play]) -> Any:
    """The trainer's model step for each rollout in turn: one tool call per turn, the play's."""
    queue = iter(scripts)

    def builder(trainer: Any, session: ResourceSession) -> Any:
        calls = iter(next(queue).calls)
        assert session.initial_messages()  # the prompt the door rendered

        def step(
            messages: list[dict[str, Any]], tools: list[Tool], sampling: dict[str, Any]
        ) -> ModelStepResult:
            assert {t.name for t in tools} >= {"submit"} or tools
            call = next(calls, None)
            if call is None:
                return ModelStepResult(response=LLMResponse(content="Done."))
            name, arguments = call
            turn = sum(1 for m in messages if m["role"] == "assistant")
            return ModelStepResult(
                response=LLMResponse(content="", tool_calls=[ToolCall(f"c{turn}", name, arguments)])
            )

        return step

    return builder


@pytest.mark.parametrize("name", FIVE)
def test_the_openenv_harness_trl_drives_gets_the_rewards(name: str, models: ChatServer) -> None:
    env = load(ENVS / f"{name}.yaml", models.base_url)
    gold, wrong = plays(env)
    options = ServerSettings(doors=("openenv",))
    with serve_app(create_app([env], options), **uvicorn_options(options)) as url:
        rollout = build_harness_rollout_func(
            session_factory=DoorSessions(f"{url}/openenv"),
            harness_adapter=MCPHarnessAdapter(),
            model_step_builder=_model_steps([gold, wrong]),
            limits=HarnessRunLimits(max_turns=20),
        )
        task = {"split": gold.split, "index": gold.index}
        out = rollout([task, task], trainer=None)
    assert out["env_reward"] == [full_reward(env), 0.0]
    assert out["verify_metrics"][0]["step_count"] == len(gold.calls)  # every gold call was a step
