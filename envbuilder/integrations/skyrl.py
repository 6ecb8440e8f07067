"""SkyRL: a spec as a ``skyrl_gym`` text environment (``BaseTextEnv``), registered under an id.

The model acts in Hermes style, a ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
block per step; a reply without one is taken as the final answer and submitted. Step rewards
follow the one convention, so SkyRL's sum over steps is the episode's reward.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:  # an optional extra
    hint = "envbuilder.integrations.skyrl needs skyrl-gym: pip install 'envbuilder[skyrl]'"
    raise ImportError(hint) from exc

from envbuilder.episode import Reply, reward_of
from envbuilder.integrations._local import LocalEpisode, describe, environment, train_split
from envbuilder.protocol import RunToolError, ToolOutput

ENV_ID = "envbuilder"
"""The id :func:`register` uses by default (``env_class`` in a SkyRL dataset row)."""

TOOL_CALL = "<tool_call>"
"""What opens a tool call in the model's reply."""

SYSTEM = (
    "You may call tools. Their signatures are within <tools></tools>:\n<tools>\n{tools}\n</tools>\n"
    "To call one, reply with a JSON object inside <tool_call></tool_call> tags:\n"
    '<tool_call>\n{{"name": <tool name>, "arguments": <arguments object>}}\n</tool_call>\n'
    "A reply without a tool call is taken as your final answer."
)


def parse_tool_call(text: str) -> dict[str, Any] | str | None:
    """The first ``<tool_call>`` of ``text`` as ``{"name", "arguments"}``; a string saying what
    is wrong with a malformed one; None when there is none."""
    start = text.find(TOOL_CALL)
    if start < 0:
        return None
    body = text[start + len(TOOL_CALL) :]
    end = body.find("</tool_call>")
    body = (body[:end] if end >= 0 else body).strip()
    try:
        call = json.loads(body)
    except ValueError as exc:
        return f"the tool call is not JSON ({exc})"
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return 'the tool call needs a "name"'
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        return '"arguments" must be an object'
    return {"name": call["name"], "arguments": arguments}


class EnvbuilderTextEnv(BaseTextEnv):
    """One episode of a spec. ``extras`` (a SkyRL dataset row's columns) or ``env_config`` name
    the ``spec`` (a path); ``extras`` give ``split``, ``task_index`` and ``max_turns``."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = extras or {}  # the dataset row's columns: read, never copied
        config = env_config or {}
        spec = extras.get("spec") or config.get("spec")
        if not spec:
            raise ValueError("EnvbuilderTextEnv needs a spec: a `spec` column or env_config.spec")
        env = environment(spec)
        self.episode = LocalEpisode.of(
            env,
            train_split(env, extras.get("split")),  # (dataset_rows writes it; else the train split)
            int(extras.get("task_index", 0)),
            extras.get("secrets"),
        )
        turns = (
            extras["max_turns"] if "max_turns" in extras else config.get("max_turns", 10) if config else 10
        )
        self.max_turns = int(turns)

    def init(self, prompt: Any) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The dataset's prompt when it has one, else the task's own (with the tools)."""
        if type(prompt) is str and prompt:
            prompt = json.loads(prompt)
        if prompt:
            return list(prompt), {}
        return chat_prompt(self.episode), {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        episode = self.episode
        call = parse_tool_call(action) if TOOL_CALL in action else None
        submit = episode.env.submit
        out: Reply | ToolOutput | RunToolError | None = None
        if call is None and submit is not None:  # a reply without a tool call: the final answer
            out = episode.step(submit.spec.name, {submit.spec.answer_field: action})
        elif type(call) is dict:
            out = episode.step(call["name"], call["arguments"])
        if out is not None:
            reward = reward_of(out)
            finished = episode.state.finished
        else:  # a malformed call (what is wrong with it), or none and no answer tool
            reward, finished = None, False
        done = finished or self.turns >= self.max_turns
        if finished:  # (no observation: the episode is over)
            observations: list[dict[str, str]] = []
            void = episode.void if reward is None else None  # (a graded end is never void)
        else:
            text = f"Error: {call or 'no tool call, and no answer tool'}" if out is None else describe(out)
            observations = [{"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}]
            void = None
        # A void end (the environment failed, not the model) is None, never 0.0: SkyRL's
        # generator skips a None step reward. Other steps without a reward add 0.0 to the sum.
        metadata: dict[str, Any] = {"finished": finished, "reward": reward}
        if void:
            metadata["void"] = void
        return BaseTextEnvStepOutput(
            observations=observations,
            reward=None if void else 0.0 if reward is None else float(reward),
            done=done,
            metadata=metadata,
        )

    def close(self) -> None:
        self.episode.end()

    def get_metrics(self) -> dict[str, Any]:
        reward = self.episode.reward
        return {
            "turns": self.turns,
            **({"reward": reward} if reward is not None else {}),
            "graded": reward is not None,
            "void": self.episode.void is not None,
        }


def chat_prompt(episode: LocalEpisode) -> list[dict[str, str]]:
    """The task's conversation with the tools described in a system message."""
    tools = "\n".join(
        json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema})
        for t in episode.tools
    )
    messages = episode.messages()
    system = SYSTEM.format(tools=tools)
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + "\n\n" + system}, *messages[1:]]
    return [{"role": "system", "content": system}, *messages]


def register(env_id: str = ENV_ID, spec: str | Path | None = None) -> str:
    """Register :class:`EnvbuilderTextEnv` with ``skyrl_gym`` under ``env_id`` (``spec`` fixed
    for every episode, or taken from each row's ``spec`` column); returns the id."""
    kwargs = {"env_config": {"spec": str(spec)}} if spec is not None else {}
    if env_id not in skyrl_gym.registry:
        skyrl_gym.register(id=env_id, entry_point=f"{__name__}:EnvbuilderTextEnv", kwargs=kwargs)
    return env_id


def dataset_rows(
    spec: str | Path, split: str | None = None, limit: int | None = None, env_id: str = ENV_ID
) -> list[dict[str, Any]]:
    """SkyRL dataset rows for ``split`` (default: the spec's train split): ``prompt`` (system
    with the tools, then the task), ``env_class``, ``spec``, ``split`` and ``task_index``."""
    env = environment(spec)
    split = train_split(env, split)
    n = len(env.split(split)) if limit is None else min(limit, len(env.split(split)))
    return [
        {
            "prompt": chat_prompt(LocalEpisode.of(env, split, i)),
            "env_class": env_id,
            "spec": str(Path(spec).resolve()),
            "split": split,
            "task_index": i,
        }
        for i in range(n)
    ]


__all__ = ["ENV_ID", "EnvbuilderTextEnv", "chat_prompt", "dataset_rows", "parse_tool_call", "register"]
