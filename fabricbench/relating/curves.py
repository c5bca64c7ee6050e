"""Swept curves: the median time of one call per size, per (fabric, op, dtype, nranks), and the time
of any size read off them.

    fabricbench relate sweeps.jsonl train.jsonl --reference default

A sweep (kind "collective" records) gives, per (fabric, op, dtype, nranks), the median time of one call
at each swept size S.

t_f is interpolated linearly in log(time) against log(size) between the two swept sizes around S (a
power law between neighbours: right in the latency regime, where t is flat, and in the bandwidth regime,
where t grows as S). Outside the swept range it is extrapolated and flagged: below the smallest size at
the smallest size's time (a latency floor), above the largest at the largest size's algbw (t ∝ S). Each
op is priced on its own swept curve, never from another op's arithmetic: gloo's reduce_scatter runs a
full all-reduce underneath, and only its own curve shows that.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass
from typing import Iterable

from fabricbench.collectives import busbw_factor
from fabricbench.dtypes import DTYPES
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.sizes import format_size as _exact_size

# The nearest swept size must lie within this factor of a traced size for the price to count as measured
# near it; a sweep with coarser steps (or none nearby) is flagged. The default sweep steps by 4.
NEAR_FACTOR = 4.0

_WIDTH = {**DTYPES, "int64": 8, "bool": 1}  # element sizes, the trace's types the sweep lacks included

# status codes of one priced collective
INTERPOLATED = "interpolated"
EXACT = "exact"
BELOW = "extrapolated below"
ABOVE = "extrapolated above"
FAR = "far from swept sizes"
DTYPE_SUBSTITUTED = "dtype substituted"
UNPRICED = "unpriced"


def placement(gpus: Iterable[int] | None) -> str:
    """Where a run's ranks ran, as sweep and train records both say it: the GPUs they shared (a sweep lists
    one ordinal per rank, a train run each GPU once), or the host."""
    got = sorted({int(g) for g in gpus or () if isinstance(g, int)})
    if not got:
        return "the host"
    return f"GPU{'s' if len(got) > 1 else ''} {','.join(map(str, got))}"


def size_3sig(nbytes: float) -> str:
    """Binary units: exact where the size is round (1M, 1.5K), else three significant digits (1.18M)."""
    for suffix, unit in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if nbytes >= unit:
            exact = _exact_size(int(nbytes)) if nbytes == int(nbytes) else ""
            if exact.endswith(suffix) and len(exact) <= 6:
                return exact
            return f"{nbytes / unit:.3g}{suffix}"
    return f"{nbytes:g}B"


@dataclass(frozen=True, kw_only=True)
class Curve:
    """Median time (seconds) of one call per swept size S (bytes) for one (fabric, op, dtype, nranks)."""

    fabric: str
    op: str
    dtype: str
    nranks: int
    sizes: tuple[int, ...]  # ascending, > 0
    times_s: tuple[float, ...]  # > 0, same length
    rels: tuple[float, ...] | None = None  # each time's relative 95% half-width (ci95_rel, else cv), same length
    gap_s: float = 0.0  # sweep --gap: each call timed after this idle gap (the link credit's curve), else 0

    def __post_init__(self) -> None:
        assert self.sizes and len(self.sizes) == len(self.times_s)
        assert all(a < b for a, b in zip(self.sizes, self.sizes[1:])), "sizes must ascend"

    def time_at(self, nbytes: int) -> tuple[float, str]:
        """(seconds, status) for one call of S = nbytes; status EXACT, INTERPOLATED, BELOW, ABOVE or FAR."""
        sizes, times = self.sizes, self.times_s
        i = bisect.bisect_left(sizes, nbytes)
        if i < len(sizes) and sizes[i] == nbytes:
            return times[i], EXACT
        if nbytes < sizes[0]:
            return times[0], BELOW
        if i == len(sizes):
            return times[-1] * nbytes / sizes[-1], ABOVE
        s0, s1, t0, t1 = sizes[i - 1], sizes[i], times[i - 1], times[i]
        w = (math.log(nbytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
        t = math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
        near = min(nbytes / s0, s1 / nbytes) <= NEAR_FACTOR
        return t, (INTERPOLATED if near else FAR)

    def rel_at(self, nbytes: int) -> float:
        """The relative uncertainty of time_at(nbytes): the larger of the neighbouring points' (0 unknown)."""
        if not self.rels:
            return 0.0
        i = bisect.bisect_left(self.sizes, nbytes)
        near = [self.rels[j] for j in (i - 1, i) if 0 <= j < len(self.rels)]
        return max(near) if near else 0.0

    def busbw_gbps(self, nbytes: int, time_s: float) -> float:
        return nbytes / time_s / 1e9 * (busbw_factor(self.op, self.nranks) or 0.0)

    def span(self) -> str:
        return f"{size_3sig(self.sizes[0])}-{size_3sig(self.sizes[-1])}"


class SweepCurves:
    """Every swept curve of a set of collective records, keyed by (fabric, op, dtype, nranks).

    Repeats of one size (several files, in- and out-of-place) combine by the median. CUDA-graph records
    are used only where a key has nothing else: training launches collectives one by one.
    """

    def __init__(self, curves: Iterable[Curve], placements: dict[tuple[str, int], set[str]] | None = None,
                 gapped: "SweepCurves | None" = None) -> None:
        # (fabric, nranks) -> where the sweep's ranks ran (placement()): the run's own placement is priced
        self.placements = placements or {}
        # the curves of `sweep --gap` records, each call after an idle gap: never prices, only the link
        # credit a call realises on a token-bucket fabric (credit.realised)
        self.gapped = gapped
        self._curves: dict[tuple[str, str, str, int], Curve] = {}
        for c in curves:
            key = (c.fabric, c.op, c.dtype, c.nranks)
            assert key not in self._curves, f"duplicate curve {key}"
            self._curves[key] = c

    @classmethod
    def from_records(cls, results: Iterable[CollectiveResult]) -> "SweepCurves":
        """The curves of the measured (status ok) collectives; an imported one that names no op, or a size
        or time that is not positive, is no point. Records of `sweep --gap` make the `gapped` curves apart:
        a call after an idle gap is not what a back-to-back price means."""
        results = list(results)
        gapped = [r for r in results if gap_of(r) > 0]
        if gapped:
            return cls._build([r for r in results if gap_of(r) <= 0], gapped=cls._build(gapped))
        return cls._build(results)

    @classmethod
    def _build(cls, results: list[CollectiveResult], gapped: "SweepCurves | None" = None) -> "SweepCurves":
        points: dict[tuple[str, str, str, int], dict[bool, dict[int, list[float]]]] = {}
        placements: dict[tuple[str, int], set[str]] = {}
        gaps: dict[tuple[str, str, str, int], float] = {}
        for r in results:
            if r.status != Status.OK or not r.time_us or not r.bytes or r.time_us <= 0 or r.bytes <= 0 or not r.op:
                continue
            key = (r.fabric, r.op, r.dtype or "float32", r.nranks or 0)
            gaps[key] = min(gaps.get(key, math.inf), gap_of(r))  # the shortest: the least the bucket refilled
            placements.setdefault((r.fabric, r.nranks or 0), set()).add(placement(r.gpus))
            per_mode = points.setdefault(key, {}).setdefault(bool(r.graph), {})
            rel = r.ci95_rel if r.ci95_rel is not None else r.cv
            per_mode.setdefault(r.bytes, []).append((r.time_us * 1e-6, float(rel or 0.0)))
        curves = []
        for key, modes in points.items():
            pts = modes.get(False) or modes[True]
            sizes = sorted(pts)
            curves.append(Curve(fabric=key[0], op=key[1], dtype=key[2], nranks=key[3], sizes=tuple(sizes),
                                times_s=tuple(statistics.median(t for t, _ in pts[s]) for s in sizes),
                                rels=tuple(_spread(pts[s]) for s in sizes), gap_s=gaps[key]))
        return cls(curves, placements, gapped)

    def __len__(self) -> int:
        return len(self._curves)

    def fabrics(self) -> list[str]:
        return list(dict.fromkeys(k[0] for k in self._curves))

    def get(self, fabric: str, op: str, dtype: str, nranks: int) -> Curve | None:
        return self._curves.get((fabric, op, dtype, nranks))

    def on(self, fabric: str) -> list[Curve]:
        return [c for k, c in self._curves.items() if k[0] == fabric]

    def find(self, fabric: str, op: str, dtype: str, nranks: int,
             nbytes: int | None = None) -> tuple[Curve | None, str | None]:
        """The curve to price (op, dtype, nranks) with on `fabric`, and why it is not an exact match.

        Another dtype's curve stands in at the same bytes (what crosses the wire is S bytes either way;
        the reduction arithmetic differs), flagged: of several, the one whose swept sizes reach `nbytes`
        (else come nearest to it), then one of the same element size (int64's float64, the lab's
        STAND_IN). Reach first: a 1-byte flag priced off a curve that starts at 1 MiB took that size's
        time, 17 ms a call on a 2 Gbit/s link, where a curve swept down to 4 B gives its 0.6 ms (the H100
        lab, when its traces had no small bfloat16 call and the uint8 flags were swept as float32).
        Another rank count never stands in: time per call depends on n.
        """
        exact = self.get(fabric, op, dtype, nranks)
        if exact is not None:
            return exact, None
        same_n = [c for c in self.on(fabric) if c.op == op and c.nranks == nranks]
        if same_n:
            width = _WIDTH.get(dtype)
            return min(same_n, key=lambda c: (_reach(c, nbytes), _WIDTH.get(c.dtype) != width, c.dtype)), \
                DTYPE_SUBSTITUTED
        return None, UNPRICED

    def missing(self, fabric: str, op: str, dtype: str, nranks: int) -> str:
        """Exactly why (op, dtype, nranks) has no curve on `fabric`, for the problems list."""
        mine = self.on(fabric)
        if not mine:
            return f"no sweep for fabric {fabric}"
        ops = [c for c in mine if c.op == op]
        if not ops:
            have = ", ".join(sorted({c.op for c in mine}))
            return f"fabric {fabric}: no {op} sweep (it has {have})"
        ns = sorted({c.nranks for c in ops})
        return (f"fabric {fabric}: nranks differ: the trace's {op} runs on {nranks} ranks, the sweep has "
                f"{', '.join(map(str, ns))}")


def gap_of(r: CollectiveResult) -> float:
    """The idle seconds before each timed call of a record (sweep --gap; its settings say it), else 0."""
    extra = r.extra if isinstance(r.extra, dict) else {}
    settings = extra.get("settings") if isinstance(extra.get("settings"), dict) else {}
    g = extra.get("gap_s", settings.get("gap_s"))
    return float(g) if isinstance(g, (int, float)) and not isinstance(g, bool) and g > 0 else 0.0


def _reach(curve: Curve, nbytes: int | None) -> float:
    """How far `nbytes` lies outside the curve's swept sizes, in log bytes (0 inside, or with no size)."""
    if not nbytes or nbytes <= 0:
        return 0.0
    lo, hi = curve.sizes[0], curve.sizes[-1]
    return math.log(lo / nbytes) if nbytes < lo else math.log(nbytes / hi) if nbytes > hi else 0.0


def _spread(points: list[tuple[float, float]]) -> float:
    """One swept size's relative uncertainty: the records' own (median), or, for several records of the
    size, the spread of their times around the median if that is larger."""
    times = [t for t, _ in points]
    med = statistics.median(times)
    own = statistics.median(r for _, r in points)
    between = (max(times) - min(times)) / 2 / med if len(times) > 1 and med > 0 else 0.0
    return max(own, between)
