"""Leaderboard rows for the catalog, generated from run summaries (or results files).

``envbuilder catalog … --results runs/*.summary.json`` puts each environment's rows on its page:
model, mean reward over all episodes with its 95 % interval (none for a run with nothing graded:
every episode void or an error is no score of the model), graded accuracy, samples, date and
the command that reproduces the run (without local paths: a spec file is named by its file
name, ``--out`` is dropped). Runs that cannot be ranked together are kept but marked with why:
another version of the environment (its content hash), another split, number of tasks, samples
per task, turn limit or answer mode than most runs of the board.
"""

from __future__ import annotations

import collections
import json
import shlex
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._records import RunSummary, parse_line
from envbuilder.eval._results import summarize, unscored
from envbuilder.eval._run import ResultsFile

__all__ = ["attach_leaderboards", "leaderboard_row"]

_HINT = "Give the .summary.json that `envbuilder eval --out` wrote"


def _load(path: Path) -> RunSummary:
    """A summary file's data; a results file (``.jsonl``) is summarised on the fly.

    Raises:
        EnvbuilderError: ``path`` is not a run summary (a field of the wrong type is named as
            ``file:1`` and its key path).
    """
    if path.suffix == ".jsonl":
        header, records = ResultsFile(path).load()
        data: Any = {**header.to_dict(), "finished": header.started, "summary": summarize(records).to_dict()}
    else:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EnvbuilderError(f"{path}: not a run summary ({exc})", hint=_HINT) from None
        if not isinstance(data, dict) or not {"run", "summary"} <= data.keys():
            raise EnvbuilderError(f"{path}: not a run summary (no `run` and `summary`)", hint=_HINT)
    return parse_line(RunSummary, data, path, 1)


def leaderboard_row(path: Path) -> dict[str, Any]:
    """One run as a leaderboard row (JSON-ready)."""
    data = _load(path)
    run, s = data.run, data.summary
    # a run with nothing graded (every episode void or an error) has no score: it is not a 0
    void = unscored({k: v for k, v in s.outcomes.model_dump().items() if isinstance(v, int)})
    return {
        "env": run.env,
        "env_hash": run.env_hash,
        "model": run.model,
        "score": None if void else s.mean_reward_all.mean,
        "ci95": [None, None] if void else list(s.mean_reward_all.ci95),
        "void": void,
        "accuracy_graded": s.accuracy_graded.mean,
        "episodes": s.episodes,
        "tasks": s.tasks,
        "samples": run.samples,
        "errors": s.outcomes.error,
        "pass_at_k": {} if void else s.pass_at_k,
        "split": run.split,
        "date": (data.finished or "")[:10],
        "command": public_command(data.command),
        "run_id": data.run_id,
        "max_turns": run.max_turns,
        "answer": run.answer,
    }


def public_command(command: str | None) -> str | None:
    """The command without local paths: spec files and folders by their names, no ``--out``."""
    if not command:
        return command
    try:
        args = shlex.split(command)
    except ValueError:
        return None
    out: list[str] = []
    skip = False
    positional = True
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--out":
            skip = True
            continue
        if arg.startswith("--out="):
            continue
        if arg.startswith("-"):
            positional = False
        elif positional and i >= 2 and not arg.startswith(("http://", "https://")):
            arg = Path(arg).name or arg
        out.append(arg)
    return shlex.join(out)


#: What must be equal for two runs to be ranked together, and how to say that it is not.
_COMPARABLE = {
    "split": lambda r: f"split {r['split']}",
    "tasks": lambda r: f"{r['tasks']} tasks",
    "samples": lambda r: f"{r['samples']} samples per task",
    "max_turns": lambda r: f"at most {r['max_turns']} turns",
    "answer": lambda r: f"answers as {r['answer']}",
}


def _mark_comparable(rows: list[dict[str, Any]]) -> None:
    """Set each row's ``not_comparable``: why it cannot be ranked with the board's usual runs
    (the most common setting among runs of the catalogued version); empty when it can."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(r.get(k) for k in _COMPARABLE)

    current = [key(r) for r in rows if r["same_version"]] or [key(r) for r in rows]
    usual = collections.Counter(current).most_common(1)[0][0] if current else ()
    for row in rows:
        why = [] if row["same_version"] else ["another version of the environment"]
        why += [say(row) for (name, say), theirs in zip(_COMPARABLE.items(), usual, strict=True)
                if row.get(name) != theirs]  # fmt: skip
        row["not_comparable"] = why


def attach_leaderboards(catalog: dict[str, Any], paths: list[Path]) -> list[str]:
    """Add a ``leaderboard`` (best first) to each catalogued environment with runs in ``paths``;
    the runs of environments not in the catalog, as warnings."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        row = leaderboard_row(path)
        rows.setdefault(row["env"], []).append(row)
    entries = {e["name"]: e for e in catalog["environments"]}
    for name, runs in rows.items():
        entry = entries.get(name)
        if entry is None:
            continue
        for row in runs:
            row["same_version"] = row["env_hash"] in (None, entry.get("content_hash"))
        # best first; a run without a score (nothing graded) last, never ranked as a 0
        board = sorted(runs, key=lambda r: (r["score"] is None, -(r["score"] or 0.0), r["model"]))
        entry["leaderboard"] = board
        _mark_comparable(entry["leaderboard"])
    return [
        f"{len(runs)} run(s) of {name!r}, which is not in the catalog"
        for name, runs in sorted(rows.items())
        if name not in entries
    ]
