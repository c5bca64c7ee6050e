"""Intervals that cover: a prediction's 95% interval for what a run on the fabric will show, and how often
the observed figures fall inside theirs.

    fabricbench relate lab/*.jsonl --json      # "coverage": {"covered": k, "points": n, "fraction": k/n}

The predicted step's 95% interval is the formula at every corner of its inputs' intervals
(model.predict_interval): the reference step's (its runs' run-to-run interval, else one run's own) and
the sweeps' per-size ones. Coverage is the share of held-out points (rows with an observed step, the
reference's own excluded) whose observed step lies in that interval; a calibrated 95% interval covers
about 95% of them, and a figure far above 95% says the intervals are wider than they need be.

The interval is not widened further for the held-out run's own noise: the reference's step enters the
prediction one for one (T_compute = T_step(ref) − e × T_comm(ref)), so its run-to-run interval is already
in every corner, and with 3 or more runs in fresh processes that interval (a t-interval, 4.3 × sd / √3
with 3 runs) is wider than the noise of one more median of as many runs. Measured before deciding: on
the committed CPU labs (16 held-out points) the intervals covered 16 of 16 as they were; widening them by
one run's noise in quadrature stretched them to 0-1100 ms for predictions of about 450 ms, and did nothing for
the one miss on the H200 lab (DDP +30% with e = 1 assumed: a bias, not noise). A reference with one run
has only its within-run interval, which understates the spread between processes (docs/domain.md): give the
reference repeats.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable

RULE = ("observed step inside the predicted step's 95% interval, over every row with an observed step except the "
        "reference's")


@dataclass(frozen=True, kw_only=True)
class Coverage:
    covered: int
    points: int
    outside: tuple[str, ...]  # "strategy on fabric: observed X ms, interval [lo-hi] ms" per point outside
    errors: tuple[float, ...] = ()  # |predicted / observed - 1| of the same held-out points

    @property
    def fraction(self) -> float | None:
        return self.covered / self.points if self.points else None

    @property
    def median_abs(self) -> float | None:
        return statistics.median(self.errors) if self.errors else None

    @property
    def max_abs(self) -> float | None:
        return max(self.errors) if self.errors else None

    def to_dict(self) -> dict[str, Any]:
        return {"covered": self.covered, "points": self.points, "fraction": self.fraction, "rule": RULE,
                "median_abs_error": self.median_abs, "max_abs_error": self.max_abs, "outside": list(self.outside)}

    def summary(self) -> str:
        """The errors and the coverage of the same held-out points, side by side: every lab's figure."""
        if not self.errors:
            return self.line()
        n = len(self.errors)
        return (f"{n} held-out point{'s' if n != 1 else ''}: median |error| {self.median_abs:.1%}, largest "
                f"{self.max_abs:.1%}; {self.line()}")

    def line(self) -> str:
        if not self.points:
            return "coverage: no held-out point (no observed step off the reference)"
        return (f"coverage: {self.covered} of {self.points} observed steps inside their predicted 95% interval "
                f"({self.fraction:.0%})")


def coverage(rows: Iterable[Any]) -> Coverage:
    """Coverage over RelateRows (fabricbench/relating/api.py): held-out = observed and not the reference."""
    covered, points, outside, errors = 0, 0, [], []
    for r in rows:
        if r.observed_step_s is None or r.fabric == r.reference or not r.predicted_step_ci95:
            continue
        points += 1
        errors.append(abs(r.predicted_step_s / r.observed_step_s - 1.0))
        lo, hi = r.predicted_step_ci95
        if lo <= r.observed_step_s <= hi:
            covered += 1
        else:
            outside.append(f"{r.strategy} on {r.fabric} ({r.model}, {r.nranks} ranks): observed "
                           f"{r.observed_step_s * 1e3:.3g} ms, interval [{lo * 1e3:.3g}-{hi * 1e3:.3g}] ms")
    return Coverage(covered=covered, points=points, outside=tuple(outside), errors=tuple(errors))
