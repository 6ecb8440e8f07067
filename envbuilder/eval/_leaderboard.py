"""Leaderboard rows for the catalog, generated from run summaries (or results files).

``envbuilder catalog … --results runs/*.summary.json`` puts each environment's rows on its page:
model, mean reward over all episodes with its 95 % interval, graded accuracy, samples, date and
the exact command that reproduces the run. A run whose environment hash differs from the
catalogued one is kept but marked, since its score is for another version of the environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._results import summarize
from envbuilder.eval._run import ResultsFile

__all__ = ["attach_leaderboards", "leaderboard_row"]

_HINT = "Give the .summary.json that `envbuilder eval --out` wrote"


def _load(path: Path) -> dict[str, Any]:
    """A summary file's data; a results file (``.jsonl``) is summarised on the fly."""
    if path.suffix == ".jsonl":
        header, records = ResultsFile(path).load()
        return {**header, "finished": header.get("started"), "summary": summarize(records).to_dict()}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EnvbuilderError(f"{path}: not a run summary ({exc})", hint=_HINT) from None
    if not isinstance(data, dict) or not {"run", "summary"} <= data.keys():
        raise EnvbuilderError(f"{path}: not a run summary (no `run` and `summary`)", hint=_HINT)
    return data


def leaderboard_row(path: Path) -> dict[str, Any]:
    """One run as a leaderboard row (JSON-ready)."""
    data = _load(path)
    run, s = data["run"], data["summary"]
    reward = s["mean_reward_all"]
    return {
        "env": run["env"],
        "env_hash": run.get("env_hash"),
        "model": run["model"],
        "score": reward["mean"],
        "ci95": reward["ci95"],
        "accuracy_graded": s["accuracy_graded"]["mean"],
        "episodes": s["episodes"],
        "tasks": s["tasks"],
        "samples": run.get("samples", 1),
        "errors": s["outcomes"]["error"],
        "pass_at_k": s.get("pass_at_k", {}),
        "split": run["split"],
        "date": (data.get("finished") or "")[:10],
        "command": data.get("command"),
        "run_id": data.get("run_id"),
    }


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
        entry["leaderboard"] = sorted(runs, key=lambda r: (-(r["score"] or 0.0), r["model"]))
    return [
        f"{len(runs)} run(s) of {name!r}, which is not in the catalog"
        for name, runs in sorted(rows.items())
        if name not in entries
    ]
