"""Episode records on disk (one JSON line each, appended as they finish) and the run's summary."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Summary", "load_records", "summarize"]

Key = tuple[str, str, int]


def key_of(record: dict[str, Any]) -> Key:
    return (str(record["env"]), str(record["split"]), int(record["index"]))


def load_records(path: Path | None) -> dict[Key, dict[str, Any]]:
    """The latest record of each (env, split, index) in ``path``; a torn last line is skipped."""
    out: dict[Key, dict[str, Any]] = {}
    if path is None or not path.exists():
        return out
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
                out[key_of(record)] = record
            except (ValueError, KeyError, TypeError):
                continue
    return out


@dataclass(frozen=True)
class Summary:
    tasks: int
    scored: int
    correct: int
    ungradeable: int
    errors: int
    mean_reward: float | None
    stderr: float | None
    turns: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None


def summarize(records: list[dict[str, Any]]) -> Summary:
    """Accuracy and mean reward over the scored episodes: those that ended without an error and
    were not ungradeable; an episode that never earned a reward counts as 0."""
    scored = [r for r in records if r.get("status") != "error" and not r.get("ungradeable")]
    rewards = [float(r.get("reward") or 0.0) for r in scored]
    n = len(rewards)
    mean = sum(rewards) / n if n else None
    stderr = None
    if n > 1 and mean is not None:
        var = sum((x - mean) ** 2 for x in rewards) / (n - 1)
        stderr = math.sqrt(var / n)
    elif n == 1:
        stderr = 0.0
    return Summary(
        tasks=len(records),
        scored=n,
        correct=sum(1 for r in scored if r.get("correct")),
        ungradeable=sum(1 for r in records if r.get("ungradeable") and r.get("status") != "error"),
        errors=sum(1 for r in records if r.get("status") == "error"),
        mean_reward=mean,
        stderr=stderr,
        turns=sum(int(r.get("turns") or 0) for r in records),
        prompt_tokens=sum(int((r.get("usage") or {}).get("prompt_tokens") or 0) for r in records),
        completion_tokens=sum(int((r.get("usage") or {}).get("completion_tokens") or 0) for r in records),
    )
