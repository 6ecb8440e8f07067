"""Statistics of a run: means with 95 % intervals that respect the scale, unbiased pass@k, paired differences.

Which interval, and why (the method is stated on every :class:`Estimate`):

* **A proportion** (every value 0 or 1: accuracy, a pass/fail reward): the **Wilson** score
  interval. Unlike mean ± 1.96 s.e. it never leaves [0, 1], is not zero-width at 0 % or 100 %
  (4 of 4 correct gives [0.51, 1]) and keeps its coverage on small groups. With several samples
  per task the samples of one task are not independent, so ``n`` is replaced by the effective
  sample size ``n / deff``, ``deff`` the design effect of clustering by task (from 1, samples
  independent, to ``n / T``, each task one fact).
* **Any other mean** (graded rewards, pass@k per task): a **clustered percentile bootstrap**,
  resampling whole tasks (2,000 resamples, a fixed seed so a run's interval is reproducible). A
  percentile interval of means lies within the values observed, so it never leaves the reward's
  range.
* **A paired difference** (``compare``): the normal interval of the mean per-task difference,
  cut to the range a difference can take.

Intervals over fewer than :data:`FEW` tasks are flagged ``few``: printed with the flag, never as
certain. ``stderr`` is always the cluster-robust standard error over tasks (Miller 2024, "Adding
error bars to evals"): ``se² = T/(T-1) · Σ_t (Σ_i (x_ti − x̄))² / n²``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FEW", "Estimate", "clustered_mean", "paired_difference", "pass_at_k", "wilson"]

Z95 = 1.959963984540054
#: Fewer tasks than this and an interval is flagged as resting on few tasks.
FEW = 10
RESAMPLES = 2000
_SEED = 20261201


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and 95 % interval (None when it cannot be estimated)."""

    mean: float | None
    stderr: float | None
    n: int
    """How many values it averages."""
    low: float | None = None
    high: float | None = None
    method: str | None = None
    """How the interval was computed: ``wilson``, ``wilson, clustered``, ``bootstrap, clustered``
    or ``normal, paired`` (see the module docstring); None without an interval."""
    clusters: int = 0
    """Over how many tasks (independent units)."""

    @property
    def few(self) -> bool:
        """The interval rests on fewer than :data:`FEW` tasks: read it as rough."""
        return self.mean is not None and self.clusters < FEW

    def format(self, percent: bool = False) -> str:
        """``0.500 [0.237, 0.763]`` (the 95 % interval); ``(few: 4 tasks)`` after an interval
        over few tasks, ``(no interval: …)`` when there is none; ``-`` with nothing to average."""
        if self.mean is None:
            return "-"
        fmt = "{:.1%}" if percent else "{:.3f}"
        tasks = "1 task" if self.clusters == 1 else f"{self.clusters} tasks"
        if self.low is None or self.high is None:
            return f"{fmt.format(self.mean)} (no interval: {tasks})"
        text = f"{fmt.format(self.mean)} [{fmt.format(self.low)}, {fmt.format(self.high)}]"
        return f"{text} (few: {tasks})" if self.few else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "stderr": self.stderr,
            "ci95": [self.low, self.high],
            "n": self.n,
            "tasks": self.clusters,
            "method": self.method,
            "few": self.few,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        low, high = (data.get("ci95") or [None, None])[:2]
        return cls(
            data.get("mean"), data.get("stderr"), int(data.get("n") or 0), low, high,
            data.get("method"), int(data.get("tasks") or data.get("n") or 0),
        )  # fmt: skip


def wilson(successes: float, n: float) -> tuple[float, float]:
    """The Wilson score 95 % interval of ``successes`` in ``n`` trials (``n`` may be an effective,
    fractional size)."""
    if n <= 0:
        raise ValueError("wilson needs n > 0")
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def _clusters(values: Iterable[tuple[object, float]]) -> dict[object, list[float]]:
    clusters: dict[object, list[float]] = {}
    for cluster, value in values:
        clusters.setdefault(cluster, []).append(value)
    return clusters


def _robust_se(clusters: dict[object, list[float]], mean: float, n: int) -> float | None:
    t = len(clusters)
    if t < 2:
        return None
    total = sum(sum(x - mean for x in v) ** 2 for v in clusters.values())
    return math.sqrt(t / (t - 1) * total) / n


def _bootstrap(sums: Sequence[float], counts: Sequence[int]) -> tuple[float, float]:
    """Percentile 95 % interval of the ratio mean ``Σ sums / Σ counts`` over resampled clusters."""
    import numpy as np

    rng = np.random.default_rng(_SEED)
    s, c = np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)
    t = len(s)
    means = np.empty(RESAMPLES)
    step = max(1, 2_000_000 // t)  # bounded memory: at most ~2M indices at once
    for start in range(0, RESAMPLES, step):
        m = min(step, RESAMPLES - start)
        idx = rng.integers(0, t, size=(m, t))
        means[start : start + m] = s[idx].sum(axis=1) / c[idx].sum(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    # the interval of a mean lies within the values observed (and so in the reward's range)
    ratios = s / c
    return float(max(low, ratios.min())), float(min(high, ratios.max()))


def clustered_mean(values: Iterable[tuple[object, float]]) -> Estimate:
    """The mean of ``(cluster, value)`` pairs with a 95 % interval that respects the scale:
    Wilson for 0/1 values, a clustered bootstrap otherwise (see the module docstring)."""
    clusters = _clusters(values)
    n = sum(len(v) for v in clusters.values())
    t = len(clusters)
    if n == 0:
        return Estimate(None, None, 0)
    mean = sum(sum(v) for v in clusters.values()) / n
    se = _robust_se(clusters, mean, n)
    if all(x in (0.0, 1.0) for v in clusters.values() for x in v):
        if t == n:
            low, high = wilson(mean * n, n)
            return Estimate(mean, se, n, low, high, "wilson", t)
        naive = mean * (1 - mean) / n
        # design effect of clustering, between 1 (samples independent) and n/t (each task one
        # fact); with no spread at all, each task counts once
        deff = min(n / t, max(1.0, (se or 0.0) ** 2 / naive)) if naive > 0 else n / t
        low, high = wilson(mean * n / deff, n / deff)
        return Estimate(mean, se, n, low, high, "wilson, clustered", t)
    if t < 2:
        return Estimate(mean, se, n, None, None, None, t)
    sums = [sum(v) for v in clusters.values()]
    counts = [len(v) for v in clusters.values()]
    low, high = _bootstrap(sums, counts)
    if high - low <= 0:  # every task has the same mean: the spread cannot be estimated
        return Estimate(mean, se, n, None, None, None, t)
    return Estimate(mean, se, n, low, high, "bootstrap, clustered", t)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct (Chen et al.
    2021, eq. 1): ``1 − C(n−c, k) / C(n, k)``, computed as a stable product."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def paired_difference(pairs: Sequence[tuple[float, float]]) -> Estimate:
    """The mean of ``b − a`` over paired ``(a, b)`` with the standard error of a paired test; the
    interval is cut to the range a difference can take (``min b − max a`` to ``max b − min a``)."""
    diffs = [b - a for a, b in pairs]
    n = len(diffs)
    if n == 0:
        return Estimate(None, None, 0)
    mean = sum(diffs) / n
    if n < 2:
        return Estimate(mean, None, n, clusters=n)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    if se == 0:  # every task moved by the same amount: no spread to build an interval on
        return Estimate(mean, se, n, clusters=n)
    lowest = min(b for _, b in pairs) - max(a for a, _ in pairs)
    highest = max(b for _, b in pairs) - min(a for a, _ in pairs)
    low, high = max(lowest, mean - Z95 * se), min(highest, mean + Z95 * se)
    return Estimate(mean, se, n, low, high, "normal, paired", n)
