"""Run episodes concurrently, append each trajectory to the results file, resume a stopped run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._agent import run_episode
from envbuilder.eval._backends import Backend
from envbuilder.eval._model import ChatModel
from envbuilder.eval._results import Summary, load_records, summarize

__all__ = ["EvalPlan", "plan_eval", "run_eval"]


@dataclass(frozen=True)
class EvalPlan:
    env: str
    split: str
    indices: list[int]
    todo: list[int]
    """Indices without a finished record in the results file (the rest are skipped)."""


async def plan_eval(
    backend: Backend, *, split: str | None, limit: int | None, out: Path | None
) -> EvalPlan:
    splits = await backend.splits()
    if split is None:
        split = "test" if "test" in splits else splits[0]
    elif split not in splits:
        raise EnvbuilderError(f"unknown split {split!r}", hint=f"Splits: {', '.join(splits)}",
                              code="invalid_split")
    n = await backend.num_tasks(split)
    indices = list(range(n if limit is None else min(n, max(0, limit))))
    done = load_records(out)
    todo = [
        i for i in indices
        if done.get((backend.env_name, split, i), {}).get("status") not in ("finished", "max_turns")
    ]
    return EvalPlan(backend.env_name, split, indices, todo)


async def run_eval(
    backend: Backend,
    model: ChatModel,
    plan: EvalPlan,
    *,
    concurrency: int = 4,
    max_turns: int = 10,
    out: Path | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Summary, list[dict[str, Any]]]:
    """Play every episode of ``plan.todo``; the summary covers all of ``plan.indices``
    (including episodes finished by an earlier run into the same ``out``)."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in plan.todo:
        queue.put_nowait(i)
    new: dict[int, dict[str, Any]] = {}
    sink = out.open("a", encoding="utf-8") if out is not None else None

    async def one(index: int) -> dict[str, Any]:
        head = {"env": plan.env, "split": plan.split, "index": index, "model": model.model}
        try:
            async with backend.episode(plan.split, index) as handle:
                record = await run_episode(handle, model, max_turns)
        except Exception as exc:  # the environment failed: this episode's error, not the run's
            record = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "reward": None,
                      "turns": 0, "usage": {}, "messages": [], "tool_calls": []}
        return {**head, **record}

    async def worker() -> None:
        while True:
            try:
                index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record = await one(index)
            new[index] = record
            if sink is not None:
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
            if on_record is not None:
                on_record(record)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        if sink is not None:
            sink.close()
    previous = load_records(out) if out is not None else {}
    records = [
        new.get(i) or previous[(plan.env, plan.split, i)]
        for i in plan.indices
        if i in new or (plan.env, plan.split, i) in previous
    ]
    return summarize(records), records
