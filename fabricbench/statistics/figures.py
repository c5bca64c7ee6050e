"""Statistics over per-iteration times: median (the headline), mean, min, max, p95, cv, and the median's
95% confidence interval that drives the adaptive mode (`fabricbench sweep --adaptive 0.02`, and the steps
of `fabricbench train`); the run-to-run interval of repeats in fresh processes; outliers.

The CI of the median is distribution-free: the order statistics at n/2 -/+ 1.96*sqrt(n)/2 bracket the
median with ~95% probability (the binomial approximation used by nvbench-style tools).

Repeats (`train --repeats`, `study`): each fresh process has its own level (pyperf, MLPerf), so a
figure's uncertainty is the spread between processes, not inside one. Few repeats (2-5) are too few for
order statistics; there the interval is median ×/÷ exp(t(0.975, n-1) * s / sqrt(n)) with s the sample
stdev of the log times (Student's t in log space: a time interval stays positive): wide at n = 2
(t = 12.7), as it must be. From 6 repeats on, the order-statistic interval above.
A ratio of two figures (a slowdown) gets the interval of interval arithmetic, [lo_a / hi_b, hi_a / lo_b]:
conservative. Whether two figures differ is not read from their intervals' overlap: comparison.py
pairs their rounds and gives a verdict.
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


# Student's t at 97.5% for n - 1 degrees of freedom, n = 2..6 (the repeat counts where order statistics
# give no 95% interval)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def repeat_ci(values: list[float]) -> tuple[float, float] | None:
    """The 95% interval [lo, hi] of the median of repeats (see the module docstring); None for n < 2."""
    n = len(values)
    if n < 2:
        return None
    s = sorted(values)
    med = percentile(s, 50)
    if n >= 6:
        half = 1.96 * math.sqrt(n) / 2
        return s[max(0, math.floor(n / 2 - half))], s[min(n - 1, math.ceil(n / 2 + half))]
    if s[0] <= 0:  # not a time: the plain interval
        mean = sum(s) / n
        h = T975[n - 1] * math.sqrt(sum((v - mean) ** 2 for v in s) / (n - 1)) / math.sqrt(n)
        return med - h, med + h
    # times are positive and spread by factors: the interval in log space, so it never reaches 0
    logs = [math.log(v) for v in s]
    mean = sum(logs) / n
    h = T975[n - 1] * math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1)) / math.sqrt(n)
    return med * math.exp(-h), med * math.exp(h)


def ci_rel(ci: tuple[float, float] | None, center: float) -> float | None:
    """Half-width of an interval over its center (3% -> 0.03); None without an interval."""
    if ci is None or center <= 0:
        return None
    return (ci[1] - ci[0]) / 2 / center


def around(center: float, rel: float) -> tuple[float, float]:
    """The interval of a positive figure (a time) whose relative half-width is rel: [c / (1 + rel), c * (1 + rel)].
    Taken as a factor, not as c * (1 -/+ rel): a noisy run's own ci95_rel can reach 1 or more (a loaded 2-core VM),
    and c * (1 - rel) would then put 0 or a negative time inside the interval."""
    f = 1.0 + max(0.0, rel)
    return center / f, center * f


def ratio_ci(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float] | None:
    """Interval of a / b from the intervals of a and b (interval arithmetic); None where b's reaches 0 or below,
    since the ratio is then unbounded and no interval can be stated."""
    if b[0] <= 0 or a[0] < 0:
        return None
    return a[0] / b[1], a[1] / b[0]


def overlaps(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Whether two intervals overlap (two studies' figures of one thing); False without an interval."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def outliers(values: list[float], k: float = 3.0) -> list[int]:
    """Indices of values outside the median -/+ k * 1.4826 * MAD (a robust z-score above k): the steps a
    mean would be pulled by (one 361 ms step among 74-81 ms ones). Empty below 5 values."""
    if len(values) < 5:
        return []
    s = sorted(values)
    med = percentile(s, 50)
    mad = percentile(sorted(abs(v - med) for v in values), 50) * 1.4826
    if mad <= 0:
        mad = 0.01 * med  # identical steps: a step 3% away is still an outlier
    return [i for i, v in enumerate(values) if abs(v - med) > k * mad]


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
