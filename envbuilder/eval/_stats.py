"""Statistics of a run: means with 95 % intervals clustered by task, unbiased pass@k, paired differences.

Intervals are normal-approximation 95 % intervals (mean ± 1.96 s.e.). With several samples per
task the samples of one task are not independent, so the standard error is the cluster-robust
one over tasks (Miller 2024, "Adding error bars to evals"):
``se² = T/(T-1) · Σ_t (Σ_i (x_ti − x̄))² / n²`` for ``T`` tasks and ``n`` episodes; with one
sample per task it is the usual ``s/√n``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Estimate", "clustered_mean", "paired_difference", "pass_at_k"]

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and 95 % interval (None when it cannot be estimated)."""

    mean: float | None
    stderr: float | None
    n: int
    """How many values it averages."""
    bounds: tuple[float, float] | None = None
    """Where the true value must lie (a proportion: 0 to 1); the interval is cut to it."""

    @property
    def low(self) -> float | None:
        if self.mean is None or self.stderr is None:
            return None
        low = self.mean - Z95 * self.stderr
        return low if self.bounds is None else max(self.bounds[0], low)

    @property
    def high(self) -> float | None:
        if self.mean is None or self.stderr is None:
            return None
        high = self.mean + Z95 * self.stderr
        return high if self.bounds is None else min(self.bounds[1], high)

    def format(self, percent: bool = False) -> str:
        """``0.500 [0.172, 0.828]`` (the 95 % interval), ``-`` when there is nothing to average."""
        if self.mean is None:
            return "-"
        fmt = "{:.1%}" if percent else "{:.3f}"
        if self.low is None or self.high is None:
            return fmt.format(self.mean)
        return f"{fmt.format(self.mean)} [{fmt.format(self.low)}, {fmt.format(self.high)}]"

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "stderr": self.stderr, "ci95": [self.low, self.high], "n": self.n}


def clustered_mean(values: Iterable[tuple[object, float]]) -> Estimate:
    """The mean of ``(cluster, value)`` pairs with a cluster-robust standard error."""
    clusters: dict[object, list[float]] = {}
    for cluster, value in values:
        clusters.setdefault(cluster, []).append(value)
    n = sum(len(v) for v in clusters.values())
    if n == 0:
        return Estimate(None, None, 0)
    mean = sum(sum(v) for v in clusters.values()) / n
    t = len(clusters)
    if t < 2:
        return Estimate(mean, None, n)
    total = sum(sum(x - mean for x in v) ** 2 for v in clusters.values())
    return Estimate(mean, math.sqrt(t / (t - 1) * total) / n, n)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct (Chen et al.
    2021, eq. 1): ``1 − C(n−c, k) / C(n, k)``, computed as a stable product."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def paired_difference(pairs: Sequence[tuple[float, float]]) -> Estimate:
    """The mean of ``b − a`` over paired ``(a, b)`` with the standard error of a paired test."""
    diffs = [b - a for a, b in pairs]
    n = len(diffs)
    if n == 0:
        return Estimate(None, None, 0)
    mean = sum(diffs) / n
    if n < 2:
        return Estimate(mean, None, n)
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)
