"""Difficulty profiles as a split reads them: the per-task table and its histogram.

A profile (written by ``envbuilder profile``, :mod:`envbuilder.eval._profile`) is one JSON line
per task with its id, where its row comes from (``source_split``, ``row``), ``pass_rate`` (the
share of samples with full credit), ``mean_reward`` (a missing reward counts 0) and ``tokens``
(mean tokens per episode). A split of any spec selects tasks by difficulty with
``profile: <table>`` and a filter such as ``pass_rate > 0 and pass_rate < 1`` (see
``data._build``), and catalogs show the distribution (:func:`histogram`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.errors import DataError

__all__ = ["PROFILE_FIELDS", "Profile", "histogram", "read_profile"]

#: The fields a profiled split's filter may use besides the row's columns.
PROFILE_FIELDS = ("pass_rate", "mean_reward", "tokens", "samples")
#: Bins of the catalog's pass-rate histogram: [0, 0.1), …, [0.9, 1.0) and exactly 1.
BINS = 11


@dataclass(frozen=True)
class Profile:
    """A per-task table as a split reads it: stats by (source split, row)."""

    path: Path
    stats: dict[tuple[str, int], dict[str, Any]]

    def rows_of(self, source_split: str) -> dict[int, dict[str, Any]]:
        """The profiled rows of ``source_split``: row number → its stats."""
        return {row: s for (label, row), s in self.stats.items() if label == source_split}


def read_profile(path: Path) -> Profile:
    """Read a table written by ``envbuilder profile``; DataError names the bad line."""
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
