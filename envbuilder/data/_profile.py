"""Difficulty profiles: how hard each task of an environment is for a model.

``profile_split`` plays every task of a split ``samples`` times with the eval runner (its
results file makes a stopped profile resumable) and writes the per-task table beside the
results: one JSON line per task with its id, where its row comes from (``source_split``,
``row``), ``pass_rate`` (the share of samples with full credit), ``mean_reward`` (a missing
reward counts 0) and ``tokens`` (mean tokens per episode). A split of any spec then selects
tasks by difficulty with ``profile: <table>`` and a filter such as
``pass_rate > 0 and pass_rate < 1`` (see ``data._build``), and catalogs show the distribution
(:func:`histogram`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuilder.errors import DataError, EnvbuilderError

if TYPE_CHECKING:
    from envbuilder.environment import Environment
    from envbuilder.eval import ChatModel

__all__ = ["PROFILE_FIELDS", "Profile", "histogram", "profile_split", "read_profile", "table_path"]

#: The fields a profiled split's filter may use besides the row's columns.
PROFILE_FIELDS = ("pass_rate", "mean_reward", "tokens", "samples")
#: The most tasks one profile plays (a generated split may have 10⁹: profile a `--limit` of them).
MAX_TASKS = 1_000_000
#: Bins of the catalog's pass-rate histogram: [0, 0.1), …, [0.9, 1.0) and exactly 1.
BINS = 11


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
    from envbuilder.eval import LocalBackend, plan_eval, run_eval

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


@dataclass(frozen=True)
class Profile:
    """A per-task table as a split reads it: stats by (source split, row)."""

    path: Path
    stats: dict[tuple[str, int], dict[str, Any]]

    def rows_of(self, source_split: str) -> dict[int, dict[str, Any]]:
        """The profiled rows of ``source_split``: row number → its stats."""
        return {row: s for (label, row), s in self.stats.items() if label == source_split}


def read_profile(path: Path) -> Profile:
    """Read a table written by :func:`profile_split`; DataError names the bad line."""
    stats: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(
            f"cannot read the profile {path}: {exc.strerror or exc}",
            hint="Write it with `envbuilder profile SPEC --model ...`",
            code="profile_unreadable",
        ) from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (str(row["source_split"]), int(row["row"]))
            stats[key] = {f: row.get(f) for f in PROFILE_FIELDS}
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(
                f"{path}:{n}: not a row of a profile table ({type(exc).__name__}: {exc})",
                hint="Write it with `envbuilder profile SPEC --model ...`",
                code="profile_unreadable",
            ) from None
    return Profile(path, stats)


def histogram(rows: list[dict[str, Any]]) -> list[int]:
    """Tasks per pass-rate bin: ten bins of width 0.1 over [0, 1), then exactly 1."""
    bins = [0] * BINS
    for row in rows:
        rate = row.get("pass_rate")
        if isinstance(rate, int | float) and math.isfinite(rate) and 0 <= rate <= 1:
            bins[10 if rate >= 1 else int(rate * 10)] += 1
    return bins
