"""Difficulty profiles: play every task of a split with a model and write its per-task table.

``profile_split`` plays every task of a split ``samples`` times with the eval runner (its
results file makes a stopped profile resumable) and writes the per-task table beside the
results, which a split reads back with ``profile:`` (:mod:`envbuilder.data._profile`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._backends import LocalBackend
from envbuilder.eval._runner import plan_eval, run_eval

if TYPE_CHECKING:
    from envbuilder.environment import Environment
    from envbuilder.llm import ChatModel

__all__ = ["profile_split", "table_path"]

#: The most tasks one profile plays (a generated split may have 10⁹: profile a `--limit` of them).
MAX_TASKS = 1_000_000


def table_path(results: Path) -> Path:
    """Where the per-task table of the results file ``results`` goes: ``x.jsonl`` → ``x.tasks.jsonl``."""
    return results.with_name(results.stem + ".tasks.jsonl")


def _passed(record: dict[str, Any]) -> bool:
    """Full credit: a correct outcome with score 1 (partial credit is not a pass)."""
    metadata = record.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("score"), int | float):
        return bool(record.get("correct")) and float(metadata["score"]) >= 1.0
    return bool(record.get("correct"))


def task_table(env: Environment, split: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per task of ``records`` (the episodes of ``split``), in index order."""
    view = env.split(split)
    by_index: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_index[int(record["index"])].append(record)
    rows = []
    for index in sorted(by_index):
        episodes = by_index[index]
        rewards = [float(r["reward"]) if isinstance(r.get("reward"), int | float) else 0.0 for r in episodes]
        tokens = [int((r.get("usage") or {}).get("total_tokens") or 0) for r in episodes]
        task_id = (episodes[0].get("task") or {}).get("id")
        rows.append(
            {
                "id": task_id if task_id is not None else view.task(index).get("id"),
                "split": split,
                "index": index,
                "source_split": view.shaper.split,
                "row": view.index[index],
                "samples": len(episodes),
                "errors": sum(1 for r in episodes if r.get("status") == "error"),
                "pass_rate": round(sum(map(_passed, episodes)) / len(episodes), 6),
                "mean_reward": round(sum(rewards) / len(rewards), 6),
                "tokens": round(sum(tokens) / len(tokens), 1),
            }
        )
    return rows


async def profile_split(
    env: Environment,
    model: ChatModel,
    *,
    split: str,
    samples: int,
    out: Path,
    limit: int | None = None,
    max_turns: int = 10,
    concurrency: int = 4,
    command: str | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Path, list[dict[str, Any]]]:
    """Run ``model`` ``samples`` times on each task of ``split`` (resuming ``out``) and write the
    per-task table beside ``out``; returns its path and its rows. Tasks with an episode that
    ended in an error are left out of the table (rerun to retry them)."""
    n = len(env.split(split))
    if (n if limit is None else min(n, limit)) > MAX_TASKS:
        raise EnvbuilderError(
            f"split {split!r} has {n:,} tasks; a profile plays each of them {samples} times",
            hint=f"Profile at most {MAX_TASKS:,} tasks: give --limit",
            code="profile_too_large",
        )
    backend = LocalBackend(env)
    plan = await plan_eval(
        backend,
        model,
        split=split,
        limit=limit,
        samples=samples,
        max_turns=max_turns,
        out=out,
        command=command,
    )
    records = await run_eval(backend, model, plan, concurrency=concurrency, on_record=on_record)
    failed = {int(r["index"]) for r in records if r.get("status") == "error"}
    rows = task_table(env, plan.split, [r for r in records if int(r["index"]) not in failed])
    path = table_path(out)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path, rows
