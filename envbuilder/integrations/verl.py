"""verl: a custom reward function with verl's signature, backed by a spec's grader, the dataset
rows it reads, and a tool config for verl's multi-turn tools.

verl needs a GPU stack, so it is not a dependency: these follow verl's documented contracts
(``custom_reward_function.path``/``name``; the tool config's ``class_name``/``config``/
``tool_schema``; the ``create``/``execute``/``calc_reward``/``release`` tool interface) and are
tested against them directly.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from envbuilder.episode import reward_of
from envbuilder.integrations._local import LocalEpisode, describe, environment, train_split
from envbuilder.threadloop import shared_loop

TOOL_CLASS = f"{__name__}.SpecTool"


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """verl's ``compute_score``: ``solution_str`` submitted to the task ``extra_info`` names
    (``spec``, ``split``, ``index``, as :func:`dataset_rows` writes them) and graded by the
    spec's grader. ``ground_truth`` is not trusted: the grader reads the task's own target.

    Returns ``{"score", "graded", "void"}``. verl writes ``score`` into its reward tensor, which
    has no "skip"; an ungraded answer scores 0.0 with ``graded`` 0, and a void one (the
    environment failed, not the answer) also has ``void`` 1, so a run can drop or count it
    from ``reward_extra_info`` (docs/explanation/rewards.md).
    """
    info = extra_info or {}
    if "spec" not in info:
        raise ValueError(f"extra_info must name the spec, split and index (data_source {data_source!r})")
    env = environment(info["spec"])
    split = train_split(env, info.get("split"))  # (dataset_rows writes it; else the train split)
    episode = LocalEpisode.of(env, split, int(info.get("index", 0)))
    assert env.submit is not None
    out = episode.step(env.submit.spec.name, {env.submit.spec.answer_field: solution_str})
    reward = reward_of(out)
    return {
        "score": 0.0 if reward is None else float(reward),
        "graded": int(reward is not None),
        "void": int(reward is None and episode.void is not None),  # (a graded answer is never void)
    }


def dataset_rows(
    spec: str | Path, split: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """verl RL dataset rows of ``split`` (default: the spec's train split): ``data_source``,
    ``prompt`` (chat messages), ``ability``, ``reward_model`` and ``extra_info`` (where
    :func:`compute_score` and :class:`SpecTool` find the task)."""
    env = environment(spec)
    split = train_split(env, split)
    path = str(Path(spec).resolve())
    view = env.split(split)
    n = len(view) if limit is None else min(limit, len(view))
    rows: list[dict[str, Any]] = []
    for i in range(n):
        episode = LocalEpisode.of(env, split, i)
        where: dict[str, Any] = {"spec": path, "split": split, "index": i}
        rows.append(
            {
                "data_source": env.name,
                "prompt": episode.messages(),
                "ability": env.name,
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": where
                | {
                    "need_tools_kwargs": True,
                    "tools_kwargs": {t.name: {"create_kwargs": where} for t in episode.tools},
                },
            }
        )
    return rows


def tool_config(spec: str | Path) -> dict[str, Any]:
    """verl's multi-turn tool config (write it as YAML for ``tool_config_path``): one
    :class:`SpecTool` per tool of the spec, with its OpenAI function schema."""
    env = environment(spec)
    task = env.split(next(iter(env.splits))).task(0)
    return {
        "tools": [
            {
                "class_name": TOOL_CLASS,
                "config": {"type": "native", "spec": str(Path(spec).resolve())},
                "tool_schema": {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema or {"type": "object", "properties": {}},
                    },
                },
            }
            for t in env.task_tools(task).tools
        ]
    }


class SpecTool:
    """A spec's tool in verl's tool interface. Each instance (``create`` … ``release``) is one
    episode on the task its ``create_kwargs`` name, so a tool's limits, costs and attempts hold
    within it; the reward of ``execute`` follows the one convention (the final call's)."""

    def __init__(self, config: dict[str, Any], tool_schema: Any):
        schema = tool_schema.model_dump() if hasattr(tool_schema, "model_dump") else dict(tool_schema)
        self.config = config
        self.tool_schema = tool_schema
        self.name: str = schema["function"]["name"]
        self._episodes: dict[str, LocalEpisode] = {}

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        where = dict(kwargs.get("create_kwargs") or kwargs)
        spec = where.get("spec") or self.config.get("spec")
        if not spec:
            raise ValueError(f"{self.name}: create_kwargs (or the tool's config) must name the spec")
        env = environment(spec)
        instance_id = instance_id or uuid.uuid4().hex
        self._episodes[instance_id] = LocalEpisode.of(
            env, train_split(env, where.get("split")), int(where.get("index", 0))
        )
        return instance_id, _response("")

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        episode = self._episodes[instance_id]
        out = await asyncio.wrap_future(shared_loop().submit(episode.astep(self.name, parameters)))
        reward = reward_of(out)
        return (
            _response(describe(out)),
            0.0 if reward is None else float(reward),
            {"finished": episode.finished},
        )

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        reward = self._episodes[instance_id].reward
        return 0.0 if reward is None else float(reward)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        episode = self._episodes.pop(instance_id, None)
        if episode is not None:
            await asyncio.wrap_future(shared_loop().submit(episode.aend()))


def _response(text: str) -> Any:
    """verl's ``ToolResponse`` when verl is installed (newer verl), else the text (older verl)."""
    try:
        from verl.tools.schemas import ToolResponse
    except ImportError:
        return text
    return ToolResponse(text=text)


__all__ = ["TOOL_CLASS", "SpecTool", "compute_score", "dataset_rows", "tool_config"]
