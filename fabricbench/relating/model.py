"""Pricing a communication trace on a fabric's sweep, and the step-time model calibrated on one fabric.

    fabricbench relate sweeps.jsonl train.jsonl --reference default

A sweep (kind "collective" records) gives, per (fabric, op, dtype, nranks), the median time of one call
at each swept size S. A train record's trace (`comm.collectives`) says which collectives one step issues:
op, S, dtype, group size and calls per step. Pricing the trace on fabric f:

    T_comm(f) = Σ_c calls_c × t_f(op_c, S_c)

t_f is interpolated linearly in log(time) against log(size) between the two swept sizes around S (a
power law between neighbours: right in the latency regime, where t is flat, and in the bandwidth regime,
where t grows as S). Outside the swept range it is extrapolated and flagged: below the smallest size at
the smallest size's time (a latency floor), above the largest at the largest size's algbw (t ∝ S). Each
op is priced on its own swept curve, never from another op's arithmetic: gloo's reduce_scatter runs a
full all-reduce underneath, and only its own curve shows that.

Step time, calibrated on the reference fabric r alone (e = the exposed fraction of communication):

    T_compute  = T_step(r) − e × T_comm(r)
    H(f)       = min((1 − e) × T_comm(f),  (1 − e) × T_comm(r))       hidden communication
    T_step(f)  = max(T_compute + T_comm(f) − H(f),  T_comm(f))

e comes from the reference run's overlap timeline (`comm.timeline.exposed_fraction`: CUDA kernels on
GPU, CPU threads on CPU); where the trace has none, e = 1 and the prediction is an upper bound (every
second of communication exposed). On a fabric faster than the reference this is T_compute + e × T_comm(f)
(the hidden share shrinks with the communication). On a slower one the hidden time stays what the
reference hid, (1 − e) × T_comm(r): overlap hides communication behind compute that runs anyway, and the
reference shows how much of that window there is; the trace cannot show more, so every extra second is
exposed and T_step(f) = T_step(r) + T_comm(f) − T_comm(r). Letting the hidden share grow with the
communication instead ((1 − e) × T_comm(f), bounded only by T_compute) under-predicted the CPU lab's DDP
step by 46% at 1 gbit, where the reference hid 70% of a 5 ms all-reduce behind the tail of backward and
the slow fabric could hide no more. A step never takes less than its communication (the floor; flagged
"communication-bound" where it binds).
Link credit. A token-bucket link (shaped:RATE: tc tbf, rate R, burst B) banks credit while it idles, up
to B bytes, and a collective that starts after an idle gap g sends its first min(B, g × R) bytes at
loopback speed. A sweep's calls run back to back and never see it; a training step's collectives follow
compute and do. Measured on this lab (2 gloo ranks, all-reduce of 0.5 and 1.5 MiB, 256 KiB bucket): a
20 ms gap before each call saved 10.1 ms at 200 mbit (B/R = 10.5 ms) and 1.8 ms at 1 gbit (2.1 ms); a
5 ms gap saved 5 ms at 200 mbit (g < B/R). So on such a fabric

    C(f)       = (1 / steps) × Σ_gaps min(B / R, g, T_comm(f) / stretches)       link credit per step
    T_comm(f) ← T_comm(f) − C(f)

over the idle gaps before each busy stretch of communication in the reference's profiled steps (every
rank's; `comm.timeline.idle_gaps_s`, trace.py), each at most what one stretch costs, and per step at
most as many gaps (the largest terms) as calls that cost a bucket or more on f: a smaller call (DDP's
128 B broadcast) leaves the bucket full for the next, which can still take only B. At a mild fabric
B / R is a large part of each collective (FSDP's 11 collectives per step on 1 gbit: 23 ms of 80 ms); at
a strong one the gaps (the compute between collectives) cap it, so the credit shrinks against the step:
this is the over-prediction at mild fabrics that vanishes at strong ones. The profiled steps run slower
than the timed ones (comm.overhead.ratio), so the gaps are divided by that ratio; the interval takes
both. Fabrics without a bucket (every real one) have C = 0; a trace without gaps (recorded before
they were) gets none, flagged.

Collectives that cannot be priced on both fabrics are left out of both
sums, and said so. The trace-weighted bus-bandwidth ratio compares the fabrics at the sizes the strategy
really sends:

    busbw_eff(f) = Σ_c calls_c × S_c × factor(op_c, n_c) / Σ_c calls_c × t_f(op_c, S_c)
    busbw_ratio  = busbw_eff(f) / busbw_eff(r)                 (= T_comm(r) / T_comm(f))

with the nccl-tests bus-bandwidth factors of fabricbench/collectives.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from fabricbench.collectives import busbw_factor
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.sizes import format_size as _exact_size

FORMULA = ("T_step(f) = max(T_compute + T_comm(f) - H(f), T_comm(f)), T_compute = T_step(ref) - e*T_comm(ref), "
           "H(f) = min((1-e)*T_comm(f), (1-e)*T_comm(ref)) (hidden communication), "
           "T_comm(f) = sum over traced collectives of calls * t_f(op, S) (swept time, log-log interpolation) "
           "- C(f), C(f) = link credit of a token-bucket fabric per step: sum over the reference's idle gaps g "
           "of min(burst/rate, g, one stretch's T_comm) / steps (0 on other fabrics), "
           "e = exposed fraction from the reference run's overlap timeline (1 where it has none: an upper bound)")

# The nearest swept size must lie within this factor of a traced size for the price to count as measured
# near it; a sweep with coarser steps (or none nearby) is flagged. The default sweep steps by 4.
NEAR_FACTOR = 4.0

# status codes of one priced collective
INTERPOLATED = "interpolated"
EXACT = "exact"
BELOW = "extrapolated below"
ABOVE = "extrapolated above"
FAR = "far from swept sizes"
DTYPE_SUBSTITUTED = "dtype substituted"
UNPRICED = "unpriced"
COMM_BOUND = "communication-bound"  # the floor T_step >= T_comm set the prediction


def format_size(nbytes: float) -> str:
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
        return nbytes / time_s / 1e9 * (busbw_factor(self.op, self.nranks) or 0.0)  # an op not ours: no bus bytes

    def span(self) -> str:
        return f"{format_size(self.sizes[0])}-{format_size(self.sizes[-1])}"


class SweepCurves:
    """Every swept curve of a set of collective records, keyed by (fabric, op, dtype, nranks).

    Repeats of one size (several files, in- and out-of-place) combine by the median. CUDA-graph records
    are used only where a key has nothing else: training launches collectives one by one.
    """

    def __init__(self, curves: Iterable[Curve]) -> None:
        self._curves: dict[tuple[str, str, str, int], Curve] = {}
        for c in curves:
            key = (c.fabric, c.op, c.dtype, c.nranks)
            assert key not in self._curves, f"duplicate curve {key}"
            self._curves[key] = c

    @classmethod
    def from_records(cls, results: Iterable[CollectiveResult]) -> "SweepCurves":
        """The curves of the measured (status ok) collectives; an imported one that names no op, or a size
        or time that is not positive, is no point."""
        points: dict[tuple[str, str, str, int], dict[bool, dict[int, list[float]]]] = {}
        for r in results:
            if r.status != Status.OK or not r.time_us or not r.bytes or r.time_us <= 0 or r.bytes <= 0 or not r.op:
                continue
            key = (r.fabric, r.op, r.dtype or "float32", r.nranks or 0)
            per_mode = points.setdefault(key, {}).setdefault(bool(r.graph), {})
            rel = r.ci95_rel if r.ci95_rel is not None else r.cv
            per_mode.setdefault(r.bytes, []).append((r.time_us * 1e-6, float(rel or 0.0)))
        curves = []
        for key, modes in points.items():
            pts = modes.get(False) or modes[True]
            sizes = sorted(pts)
            curves.append(Curve(fabric=key[0], op=key[1], dtype=key[2], nranks=key[3], sizes=tuple(sizes),
                                times_s=tuple(statistics.median(t for t, _ in pts[s]) for s in sizes),
                                rels=tuple(_spread(pts[s]) for s in sizes)))
        return cls(curves)

    def __len__(self) -> int:
        return len(self._curves)

    def fabrics(self) -> list[str]:
        return list(dict.fromkeys(k[0] for k in self._curves))

    def get(self, fabric: str, op: str, dtype: str, nranks: int) -> Curve | None:
        return self._curves.get((fabric, op, dtype, nranks))

    def on(self, fabric: str) -> list[Curve]:
        return [c for k, c in self._curves.items() if k[0] == fabric]

    def find(self, fabric: str, op: str, dtype: str, nranks: int) -> tuple[Curve | None, str | None]:
        """The curve to price (op, dtype, nranks) with on `fabric`, and why it is not an exact match.

        Another dtype's curve stands in at the same bytes (what crosses the wire is S bytes either way;
        the reduction arithmetic differs), flagged. Another rank count never does: time per call
        depends on n.
        """
        exact = self.get(fabric, op, dtype, nranks)
        if exact is not None:
            return exact, None
        same_n = [c for c in self.on(fabric) if c.op == op and c.nranks == nranks]
        if same_n:
            return same_n[0], DTYPE_SUBSTITUTED
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


@dataclass(frozen=True, kw_only=True)
class PricedCollective:
    op: str
    bytes: int
    dtype: str
    group_size: int
    calls_per_step: float
    time_s: float | None  # one call; None when unpriced
    status: str  # EXACT, INTERPOLATED, BELOW, ABOVE, FAR or UNPRICED
    curve: Curve | None = None  # the curve it was priced on (its dtype may differ: see substituted)
    rel: float = 0.0  # relative 95% half-width of time_s (Curve.rel_at)

    @property
    def substituted(self) -> bool:
        return self.curve is not None and self.curve.dtype != self.dtype

    @property
    def step_time_s(self) -> float:
        return (self.time_s or 0.0) * self.calls_per_step

    @property
    def bus_bytes(self) -> float:
        """calls × S × busbw factor: the numerator of the trace-weighted busbw."""
        return self.calls_per_step * self.bytes * (busbw_factor(self.op, self.group_size) or 0.0)


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """A trace priced on one fabric's sweep."""

    fabric: str
    entries: tuple[PricedCollective, ...]
    flags: tuple[str, ...] = field(default=())  # one sentence per thing that is not measured as asked

    @property
    def time_s(self) -> float:
        return sum(e.step_time_s for e in self.entries if e.time_s is not None)

    def substituted(self) -> bool:
        return any(e.substituted for e in self.entries)

    def rel(self) -> float:
        """Relative half-width of time_s: the time-weighted mean of the entries' (0 when nothing priced)."""
        t = self.time_s
        return sum(e.step_time_s * e.rel for e in self.entries if e.time_s is not None) / t if t > 0 else 0.0


def price(collectives: Iterable[dict[str, Any]], curves: SweepCurves, *, fabric: str,
          nranks: int | None = None, dtype: str | None = None) -> Pricing:
    """Price every traced collective on `fabric`'s sweep. Entries' own dtype and group_size win over the
    `dtype` / `nranks` defaults (which fill in entries that lack them)."""
    entries: list[PricedCollective] = []
    notes: dict[tuple[str, str, str, int], list[PricedCollective]] = {}
    for c in collectives:
        op = c["op"]
        n = int(c.get("group_size") or nranks or 0)
        dt = c.get("dtype") or dtype or "float32"
        nbytes = int(c["bytes"])
        calls = float(c.get("calls_per_step") or 0.0)
        curve, why = curves.find(fabric, op, dt, n)
        if curve is None:
            pc = PricedCollective(op=op, bytes=nbytes, dtype=dt, group_size=n, calls_per_step=calls,
                                  time_s=None, status=UNPRICED)
        elif nbytes <= 0:
            pc = PricedCollective(op=op, bytes=nbytes, dtype=dt, group_size=n, calls_per_step=calls,
                                  time_s=0.0, status=EXACT, curve=curve)
        else:
            t, status = curve.time_at(nbytes)
            pc = PricedCollective(op=op, bytes=nbytes, dtype=dt, group_size=n, calls_per_step=calls, time_s=t,
                                  status=status, curve=curve, rel=curve.rel_at(nbytes))
        entries.append(pc)
        if pc.status not in (EXACT, INTERPOLATED):
            notes.setdefault((pc.status, op, dt, n), []).append(pc)
        if why == DTYPE_SUBSTITUTED:
            notes.setdefault((DTYPE_SUBSTITUTED, op, dt, n), []).append(pc)
    flags = [_flag(status, op, dt, n, group, curves, fabric) for (status, op, dt, n), group in notes.items()]
    return Pricing(fabric=fabric, entries=tuple(entries), flags=tuple(flags))


def comm_time(collectives: Iterable[dict[str, Any]], curves: SweepCurves, *, fabric: str,
              nranks: int | None = None, dtype: str | None = None) -> tuple[float, list[str]]:
    """(seconds of communication per step on `fabric`, flags): Σ calls × swept time, unpriced ones left
    out and flagged. See the module docstring for the interpolation."""
    p = price(collectives, curves, fabric=fabric, nranks=nranks, dtype=dtype)
    return p.time_s, list(p.flags)


def _flag(status: str, op: str, dtype: str, n: int, group: list[PricedCollective], curves: SweepCurves,
          fabric: str) -> str:
    sizes = sorted({e.bytes for e in group})
    shown = format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}-{format_size(sizes[-1])}"
    what = f"{op} {dtype} on {n} ranks at {shown}"
    per_step = sum(e.calls_per_step * e.bytes for e in group)
    curve = group[0].curve
    if status == UNPRICED:
        return f"{curves.missing(fabric, op, dtype, n)}: {what} ({format_size(int(per_step))}/step) not priced"
    assert curve is not None
    if status == DTYPE_SUBSTITUTED:
        return (f"fabric {fabric}: {what} priced from the {curve.dtype} sweep at the same bytes "
                f"(no {dtype} sweep of {op})")
    if status == BELOW:
        return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} lies below the smallest "
                f"swept size {format_size(curve.sizes[0])} (extrapolated: that size's time)")
    if status == ABOVE:
        return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} lies above the largest "
                f"swept size {format_size(curve.sizes[-1])} (extrapolated at that size's bandwidth)")
    assert status == FAR
    return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} is more than {NEAR_FACTOR:g}x "
            f"from the nearest swept sizes ({curve.span()}, interpolated)")


def bucket_s(fabric: str) -> float | None:
    """B / R: seconds of the link's rate a full token bucket is worth (None: no bucket on this fabric)."""
    try:
        fab = get_fabric(fabric)
    except UsageError:  # a name from imported records that is no fabric here: nothing known of a bucket
        return None
    burst = getattr(fab, "burst_bytes", None)
    return burst * 8 / fab.rate_bps if burst and fab.rate_bps else None


@dataclass(frozen=True, kw_only=True)
class Gaps:
    """The link's idle gaps before each busy stretch of communication over `steps` profiled rank-steps
    (trace.py's comm.timeline.idle_gaps_s / idle_gap_steps), and the profiled/timed step ratio."""

    gaps_s: tuple[float, ...]
    steps: int
    overhead: float = 1.0  # comm.overhead.ratio: profiled step / timed step (>= 1 dilates the gaps)

    @classmethod
    def from_timeline(cls, timeline: dict[str, Any] | None, overhead: float | None) -> "Gaps | None":
        if not isinstance(timeline, dict) or not timeline.get("idle_gap_steps"):
            return None
        gaps = timeline.get("idle_gaps_s")
        if not isinstance(gaps, list):
            return None
        return cls(gaps_s=tuple(max(0.0, float(g)) for g in gaps), steps=int(timeline["idle_gap_steps"]),
                   overhead=max(1.0, float(overhead)) if overhead else 1.0)

    @property
    def stretches_per_step(self) -> float:
        return len(self.gaps_s) / self.steps

    def credit(self, *, bucket_s: float | None, comm_s: float, scaled: bool = True,
               draining_per_step: float | None = None) -> float:
        """C(f) of the module docstring: seconds per step the bucket saves. scaled: gaps divided by the
        profiler's overhead (the timed steps' gaps); else as profiled (the larger bound). draining_per_step:
        the calls per step that cost at least a bucket (a smaller call, e.g. DDP's 128 B broadcast, leaves
        the bucket full for the next one, which can still take only B): at most that many gaps count per
        step, the largest."""
        if not bucket_s or not self.gaps_s or comm_s <= 0:
            return 0.0
        stretch = comm_s / self.stretches_per_step
        k = self.overhead if scaled else 1.0
        terms = sorted((min(bucket_s, g / k, stretch) for g in self.gaps_s), reverse=True)
        if draining_per_step is not None:
            terms = terms[:max(0, round(draining_per_step * self.steps))]
        return sum(terms) / self.steps


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """The model's figures for one strategy on one fabric, calibrated on the reference."""

    comm_time_s: float  # T_comm(f) over the collectives priced on both fabrics, less the link credit
    comm_time_ref_s: float  # T_comm(ref) over the same collectives, less the link credit
    compute_s: float  # T_compute = T_step(ref) − e × T_comm(ref)
    predicted_step_s: float
    busbw_ratio: float | None  # busbw_eff(f) / busbw_eff(ref)
    busbw_gbps: float | None  # busbw_eff(f)
    flags: tuple[str, ...]
    credit_s: float = 0.0  # C(f): the link credit taken off T_comm(f)
    credit_ref_s: float = 0.0  # C(ref)


def _spread(points: list[tuple[float, float]]) -> float:
    """One swept size's relative uncertainty: the records' own (median), or, for several records of the
    size, the spread of their times around the median if that is larger."""
    times = [t for t, _ in points]
    med = statistics.median(times)
    own = statistics.median(r for _, r in points)
    between = (max(times) - min(times)) / 2 / med if len(times) > 1 and med > 0 else 0.0
    return max(own, between)


def hidden(*, e: float, t_ref: float, t_fab: float, window_s: float | None) -> float:
    """H(f), the communication hidden behind compute on fabric f (module docstring): (1 − e) × T_comm(f),
    at most the overlap window W (the reference's compute between its first and last collective's start,
    trace.py), and never less of a window than the reference itself hid. Without a window (traces from
    before it was recorded) the reference's hidden time (1 − e) × T_comm(ref) is the cap."""
    cap = (1.0 - e) * t_ref if window_s is None else max(window_s, (1.0 - e) * t_ref)
    return min((1.0 - e) * t_fab, cap)


def step_formula(*, ref_step_s: float, e: float, t_ref: float, t_fab: float, floor: bool = True,
                 window_s: float | None = None) -> float:
    """T_step(f) of the module docstring from its inputs (compute clipped at 0; the floor T_comm(f))."""
    compute = max(0.0, ref_step_s - e * t_ref)
    step = compute + t_fab - hidden(e=e, t_ref=t_ref, t_fab=t_fab, window_s=window_s)
    return max(step, t_fab) if floor else step


def predict_interval(*, ref_ci: tuple[float, float], e: float, t_ref: tuple[float, float],
                     t_fab: tuple[float, float], floor: bool = True,
                     window_s: float | None = None) -> tuple[float, float]:
    """The predicted step's 95% interval: step_formula at every corner of its inputs' intervals (the
    reference step's run-to-run interval, T_comm on each fabric from the sweeps' per-size intervals),
    lowest and highest; interval arithmetic, so conservative."""
    vals = [step_formula(ref_step_s=a, e=e, t_ref=b, t_fab=c, floor=floor, window_s=window_s)
            for a in ref_ci for b in t_ref for c in t_fab]
    return min(vals), max(vals)


def _credit(gaps: Gaps | None, pricing: Pricing, entries: list[PricedCollective], comm_s: float,
            scaled: bool) -> float:
    """C on pricing's fabric: the gaps' credit, counting only as many per step as calls drain a bucket."""
    b = bucket_s(pricing.fabric)
    if gaps is None or b is None:
        return 0.0
    draining = sum(e.calls_per_step for e in entries if (e.time_s or 0.0) >= b)
    return gaps.credit(bucket_s=b, comm_s=comm_s, scaled=scaled, draining_per_step=draining)


def predict(*, ref_step_s: float, exposed_fraction: float, on_ref: Pricing, on_fabric: Pricing,
            window_s: float | None = None, gaps: Gaps | None = None, scaled: bool = True) -> Prediction:
    """T_step(f) = max(T_compute + T_comm(f) − H(f), T_comm(f)) as the module docstring says, over the
    collectives priced on both fabrics, each T_comm less its fabric's link credit (from `gaps`)."""
    assert 0.0 <= exposed_fraction <= 1.0 and ref_step_s > 0
    assert len(on_ref.entries) == len(on_fabric.entries), "both pricings must be of the same trace"
    common = [(r, f) for r, f in zip(on_ref.entries, on_fabric.entries)
              if r.time_s is not None and f.time_s is not None]
    swept_ref = sum(r.step_time_s for r, _ in common)
    swept_fab = sum(f.step_time_s for _, f in common)
    c_ref = _credit(gaps, on_ref, [r for r, _ in common], swept_ref, scaled)
    c_fab = _credit(gaps, on_fabric, [f for _, f in common], swept_fab, scaled)
    t_ref, t_fab = swept_ref - c_ref, swept_fab - c_fab
    flags: list[str] = []
    compute = ref_step_s - exposed_fraction * t_ref
    if compute < 0:
        # The sweep prices more exposed communication than the whole observed step: the calibration
        # cannot hold (e too high, or the sweep slower than what training saw). Keep the step non-negative.
        flags.append("calibration clipped: e*T_comm(ref) exceeds the observed reference step")
        compute = 0.0
    step = compute + t_fab - hidden(e=exposed_fraction, t_ref=t_ref, t_fab=t_fab, window_s=window_s)
    if t_fab > step and on_fabric is not on_ref:  # the reference is what it was observed to be
        flags.append(COMM_BOUND)
        step = t_fab
    # the busbw the sweeps measured at the traced sizes: the fabric's, not the credit's
    bus = sum(f.bus_bytes for _, f in common)
    eff_fab = bus / swept_fab / 1e9 if swept_fab > 0 and bus > 0 else None
    eff_ref = bus / swept_ref / 1e9 if swept_ref > 0 and bus > 0 else None
    ratio = eff_fab / eff_ref if eff_fab and eff_ref else None
    return Prediction(comm_time_s=t_fab, comm_time_ref_s=t_ref, compute_s=compute,
                      predicted_step_s=step, busbw_ratio=ratio,
                      busbw_gbps=eff_fab, flags=tuple(flags), credit_s=c_fab, credit_ref_s=c_ref)
