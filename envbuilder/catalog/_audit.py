"""The recorded result of ``envbuilder check --hacks --record``: ``<spec stem>.hacks.json``.

The audit is slow (a code sandbox per answer, a judge endpoint), so a catalog does not run it: it
publishes the record written beside the spec. The record names the content hash of the files it
audited (every file of the environment but the record itself); a catalog entry calls it "stale"
when the files changed since, and "not audited" when there is none. The record is one of the
environment's files (``Environment.files``), so packs carry it.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuilder._version import __version__
from envbuilder.catalog._files import content_hash, file_sha256
from envbuilder.environment import HACKS_RECORD_SUFFIX, Environment

if TYPE_CHECKING:
    from envbuilder.authoring import HackReport

__all__ = ["APPLIES_TO", "audit_summary", "audited_hash", "record_path", "write_record"]

_FORMAT = 1


def record_path(env: Environment) -> Path | None:
    """Where the record of ``env`` goes: beside its spec (None for a spec without a file)."""
    path = env.loaded.path
    return None if path is None else path.with_name(path.stem + HACKS_RECORD_SUFFIX)


APPLIES_TO = (
    "the environment's files but the audit record itself (which cannot hold its own hash): "
    "the entry's content_hash also covers the record, so the two hashes differ"
)
"""What an audit's ``content_hash`` is the hash of, said in every published audit."""


def audited_hash(env: Environment) -> str:
    """The content hash an audit applies to: every file of ``env`` but the record itself."""
    record = record_path(env)
    skip = record.resolve() if record is not None else None
    return content_hash(
        {name: file_sha256(path) for name, path in env.files.items() if path.resolve() != skip}
    )


def write_record(env: Environment, report: HackReport, *, seed: int, sample: int) -> Path:
    """Write the record of ``report`` beside the spec of ``env``; returns its path."""
    path = record_path(env)
    if path is None:
        raise ValueError("an environment without a spec file has nowhere to keep its audit")
    record = {
        "format": _FORMAT,
        "content_hash": audited_hash(env),
        "max_reward": report.worst,
        "hostile_answers": len(report.results),
        "rewarded": [
            {"answer": r.case.label, "task": f"{r.case.split}[{r.case.index}]", "reward": r.reward}
            for r in report.rewarded
        ],
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "envbuilder": __version__,
        "seed": seed,
        "sample": sample,
    }
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def audit_summary(env: Environment) -> dict[str, Any]:
    """The audit as a catalog entry publishes it.

    ``status`` is ``passed`` (no hostile answer earned reward), ``failed``, ``stale`` (the record
    is for other files: ``content_hash`` is the one it applies to, ``current_hash`` today's),
    ``not audited`` (no record) or ``unreadable`` (with ``error``).
    """
    path = record_path(env)
    if path is None or not path.is_file():
        return {"status": "not audited"}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        summary: dict[str, Any] = {
            "content_hash": str(record["content_hash"]),
            "max_reward": float(record["max_reward"]),
            "hostile_answers": int(record["hostile_answers"]),
            "rewarded": list(record.get("rewarded", [])),
            "date": str(record["date"]),
            "envbuilder": str(record.get("envbuilder", "")),
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return {"status": "unreadable", "error": f"{path.name}: {type(exc).__name__}: {exc}"}
    summary["applies_to"] = APPLIES_TO
    current = audited_hash(env)
    if summary["content_hash"] != current:
        return {"status": "stale", **summary, "current_hash": current}
    passed = summary["max_reward"] <= 0
    return {"status": "passed" if passed else "failed", **summary}
