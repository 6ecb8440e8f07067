"""The trainers' own ORS adapters, as their users run them, for the adapter tests.

- TRL's ``trl.experimental.openreward`` is loaded from the installed ``trl`` wheel's files
  without running ``trl/__init__.py`` (which imports torch through accelerate and transformers):
  CI installs the wheel with ``--no-deps`` so no torch is needed.
- SkyRL's openreward environment ships only in the SkyRL repository's examples, not on PyPI.
  :class:`SkyRLOpenRewardEnv` makes the calls that example makes, on the real ``skyrl_gym``
  ``BaseTextEnv``: ``OpenReward()`` from the environment variables, ``environments.get(name=…)``
  (bare paths, the name in ``X-Deployment``), ``session(split=…, index=…)``, and per step a
  Hermes ``<tool_call>`` parsed into ``call_tool``; the rewards of the steps are summed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput


def trl_openreward() -> types.ModuleType:
    """``trl.experimental.openreward`` from the installed trl, without importing torch."""
    name = "trl.experimental.openreward"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        if os.environ.get("CI"):
            raise RuntimeError("trl is not installed: .ci/run installs it with pip install --no-deps trl")
        pytest.skip("trl is not installed (pip install --no-deps 'trl==1.16.0')")
    root = Path(next(iter(spec.submodule_search_locations)))
    for package, folder in (("trl", root), ("trl.experimental", root / "experimental")):
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [str(folder)]
            sys.modules[package] = module
    folder = root / "experimental" / "openreward"
    module_spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def hermes(name: str, arguments: dict[str, Any]) -> str:
    """A model turn that calls a tool the way SkyRL's openreward example parses it."""
    return f"Let me do that.\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


class SkyRLOpenRewardEnv(BaseTextEnv):  # type: ignore[misc]
    """SkyRL's openreward environment, as its example drives the openreward client."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        self.env_name = extras["env_name"]
        self.split = extras["split"]
        self.task_index = int(extras["task_index"])
        self.max_turns = extras.get("max_turns", 10)
        self.step_rewards: list[float] = []
        self._context: Any = None
        self._client: Any = None
        self.session: Any = None

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        from openreward import OpenReward

        self._client = OpenReward()
        env = self._client.environments.get(name=self.env_name)
        self._context = env.session(split=self.split, index=self.task_index)
        self.session = self._context.__enter__()
        return prompt, {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        start = action.find("<tool_call>")
        if start < 0:  # no tool call: the episode ends with what was earned
            return BaseTextEnvStepOutput(
                observations=[], reward=sum(self.step_rewards), done=True, metadata={}
            )
        body = action[start + len("<tool_call>") :].split("</tool_call>")[0]
        call = json.loads(body)
        try:
            out = self.session.call_tool(tool_name=call["name"], input=call.get("arguments", {}))
            text = "".join(b.text for b in out.blocks if b.type == "text")
            reward, finished = out.reward or 0.0, out.finished
        except Exception as exc:  # the example's catch-all: errors become an observation
            text, reward, finished = f"Error: {exc}", 0.0, False
        self.step_rewards.append(reward)
        done = finished or self.turns >= self.max_turns
        return BaseTextEnvStepOutput(
            observations=[{"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}],
            reward=sum(self.step_rewards) if done else reward,
            done=done,
            metadata={"finished": finished},
        )

    def close(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None
            self._client.close()  # (the example leaves this to the process's end)


async def skyrl_prepare_rows(env_name: str, split: str, count: int) -> list[dict[str, Any]]:
    """SkyRL's ``prepare_tasks`` calls: the async client, ``num_tasks``, then a session per task
    for its prompt and tools."""
    from openreward import AsyncOpenReward

    client = AsyncOpenReward()
    env = client.environments.get(name=env_name)
    rows = []
    try:
        total = await env.num_tasks(split)
        for index in range(min(count, total)):
            async with env.session(split=split, index=index) as session:
                blocks = await session.get_prompt()
                tools = await session.list_tools()
            rows.append(
                {
                    "prompt": "".join(b.text for b in blocks if b.type == "text"),
                    "tools": sorted(t.name for t in tools),
                    "env_name": env_name,
                    "split": split,
                    "task_index": index,
                }
            )
    finally:
        await client.environments.aclose()
    return rows
