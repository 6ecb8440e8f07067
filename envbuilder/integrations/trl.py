"""TRL: a spec's ``train_dataset``, ``environment_factory`` and ``reward_funcs`` for
``GRPOTrainer``, in process (no server), with the tools bound as TRL's own ORS adapter binds
them: one typed method per tool, with a Google-style docstring for the tool schema.

Over HTTP, ``served_spec(url)`` is TRL's own adapter pointed at an ``envbuilder serve`` URL
(no ``OPENREWARD_SESSION_URL`` needed).
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from envbuilder.environment import Environment
from envbuilder.integrations._local import LocalEpisode, describe, environment, train_split
from envbuilder.integrations._trl_http import served_spec
from envbuilder.protocol import ToolSpec

PROMPTS_KEPT = 4096
"""Rendered prompts an environment class keeps (the most recent tasks')."""

_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


class TRLEnvironment:
    """One rollout slot: ``reset(**row)`` opens an episode, tool methods call it, and
    :attr:`reward` is the episode's reward (None while nothing was graded)."""

    _env: Environment
    _split: str
    _prompts: dict[int, str]
    """Each task's rendered prompt, shared by the class's instances: a GRPO group resets the
    same task once per sample, and a prompt depends on the task alone."""

    def __init__(self) -> None:
        self.episode: LocalEpisode | None = None

    def reset(self, *, task_index: int = 0, **_: Any) -> str:
        """Start the episode on task ``task_index``; its prompt is what TRL appends."""
        if self.episode is not None:
            self.episode.end()
        index = int(task_index)
        self.episode = LocalEpisode.of(self._env, self._split, index)
        prompt = self._prompts.get(index)
        if prompt is None:
            if len(self._prompts) >= PROMPTS_KEPT:
                self._prompts.pop(next(iter(self._prompts)), None)  # the oldest
            prompt = self._prompts[index] = self.episode.prompt()
        return prompt

    @property
    def reward(self) -> float | None:
        return None if self.episode is None else self.episode.reward

    @property
    def void(self) -> str | None:
        """Why the episode is void (None when it is not): its reward is None, which TRL's
        ``GRPOTrainer`` leaves out of the group's baseline and gives no advantage."""
        return None if self.episode is None else self.episode.void

    @property
    def rewards(self) -> list[float | None]:
        return [] if self.episode is None else list(self.episode.rewards)

    @property
    def finished(self) -> bool:
        return self.episode is not None and self.episode.finished

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.episode is None:
            raise RuntimeError("call reset() before a tool")
        return describe(self.episode.step(name, arguments))


def _method(tool: ToolSpec) -> Callable[..., str] | None:
    """A method ``tool.name(self, **params) -> str`` with the schema's types and docs; None when
    a name is not a Python identifier (TRL's adapter skips those too)."""
    schema = tool.input_schema or {}
    props: dict[str, dict[str, Any]] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    names = [tool.name, *props]
    if not all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
        return None
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    docs = []
    for name in sorted(props, key=lambda n: n not in required):  # required first
        prop = props[name]
        kind = _TYPES.get(prop.get("type", "string"), str)
        default = inspect.Parameter.empty if name in required else prop.get("default")
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        annotations[name] = kind
        docs.append(f"        {name}: {prop.get('description') or name}")

    def call(self: TRLEnvironment, **kwargs: Any) -> str:
        return self._call(tool.name, kwargs)

    call.__name__ = call.__qualname__ = tool.name
    call.__doc__ = (tool.description or f"Call the {tool.name} tool.") + (
        "\n\n    Args:\n" + "\n".join(docs) if docs else ""
    )
    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = annotations
    return call


def environment_class(env: Environment, split: str | None = None) -> type[TRLEnvironment]:
    """A :class:`TRLEnvironment` subclass for ``env`` with one method per tool of its tasks
    (on ``split``; default: the spec's train split)."""
    split = train_split(env, split)
    methods: dict[str, Any] = {"_env": env, "_split": split, "_prompts": {}}
    for tool in env.task_tools(env.split(split).task(0)).tools:
        method = _method(tool)
        if method is not None and not hasattr(TRLEnvironment, tool.name):
            methods[tool.name] = method
    return type(f"TRLEnvironment_{env.name.replace('-', '_')}", (TRLEnvironment,), methods)


def episode_reward(environments: list[TRLEnvironment], **_: Any) -> list[float | None]:
    """TRL reward function: each rollout's episode reward (None: nothing was graded, or the
    episode is void; TRL skips a completion whose every reward function returns None)."""
    return [e.reward for e in environments]


class TRLSpec:
    """What ``GRPOTrainer`` takes, from a spec: ``train_dataset``, ``environment_factory``,
    ``reward_funcs``. ``split`` defaults to the spec's train split (an error when it has none:
    name a split to train on it); ``num_tasks`` caps the dataset (default: the whole split)."""

    def __init__(
        self, spec: str | Path | Environment, *, split: str | None = None, num_tasks: int | None = None
    ):
        self.env = environment(spec)
        self.split = train_split(self.env, split)
        self.num_tasks = num_tasks

    @cached_property
    def train_dataset(self) -> Any:
        """A ``datasets.Dataset``: an empty user turn (TRL appends ``reset``'s prompt) and the
        ``task_index`` ``reset`` receives."""
        from datasets import Dataset

        n = len(self.env.split(self.split))
        n = n if self.num_tasks is None else min(n, self.num_tasks)
        return Dataset.from_dict(
            {"prompt": [[{"role": "user", "content": ""}]] * n, "task_index": list(range(n))}
        )

    @cached_property
    def environment_factory(self) -> Callable[[], TRLEnvironment]:
        return environment_class(self.env, self.split)

    @property
    def reward_funcs(self) -> Callable[..., list[float | None]]:
        return episode_reward


__all__ = ["TRLEnvironment", "TRLSpec", "environment_class", "episode_reward", "served_spec"]
