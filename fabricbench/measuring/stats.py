"""Statistics over per-iteration times: median (the headline), mean, min, max, p95, cv, and the median's
95% confidence interval that drives the adaptive mode (`fabricbench sweep --adaptive 0.02`).

The CI of the median is distribution-free: the order statistics at n/2 -/+ 1.96*sqrt(n)/2 bracket the
median with ~95% probability (the binomial approximation used by nvbench-style tools).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Stats:
    n: int
    median: float
    mean: float
    min: float
    max: float
    p95: float
    cv: float  # population stdev / mean
    ci95_rel: float | None  # half-width of the median's 95% CI over the median; None when n < 6


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), q in [0, 100]."""
    assert sorted_values
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_ci_rel(sorted_values: list[float]) -> float | None:
    n = len(sorted_values)
    if n < 6:
        return None
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    med = percentile(sorted_values, 50)
    if med <= 0:
        return None
    return (sorted_values[hi] - sorted_values[lo]) / 2 / med


def summarize(times: list[float]) -> Stats:
    assert times, "no samples"
    s = sorted(times)
    n = len(s)
    mean = sum(s) / n
    var = sum((t - mean) ** 2 for t in s) / n
    return Stats(n=n, median=percentile(s, 50), mean=mean, min=s[0], max=s[-1], p95=percentile(s, 95),
                 cv=math.sqrt(var) / mean if mean > 0 else 0.0, ci95_rel=median_ci_rel(s))


def combine_slowest(per_rank: list[list[float]]) -> list[float]:
    """Per iteration, the slowest rank's time: a collective is done when its last rank is done."""
    assert per_rank and all(len(r) == len(per_rank[0]) for r in per_rank), "ranks timed different counts"
    return [max(vals) for vals in zip(*per_rank)]
