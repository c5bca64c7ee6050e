"""Link credit: what a token-bucket link banks while idle and a training step spends, which a sweep never
sees.

    fabricbench relate sweeps.jsonl train.jsonl --reference default

A token-bucket link (shaped:RATE: tc tbf, rate R, burst B) banks credit while it idles, up
to B bytes, and a collective that starts after an idle gap g sends its first min(B, g × R) bytes at
loopback speed. A sweep's calls run back to back and never see it; a training step's collectives follow
compute and do. Measured on this lab (2 gloo ranks, all-reduce of 0.5 and 1.5 MiB, 256 KiB bucket): a
20 ms gap before each call saved 10.1 ms at 200 mbit (B/R = 10.5 ms) and 1.8 ms at 1 gbit (2.1 ms); a
5 ms gap saved 5 ms at 200 mbit (g < B/R). So on such a fabric

    C(f)       = (1 / steps) × Σ_gaps min(B / R, g, T_comm(f) / stretches)       link credit per step
    T_comm(f) ← T_comm(f) − C(f)

over the idle gaps before each busy stretch of communication in the reference's profiled steps (every
rank's; `comm.timeline.idle_gaps_s`, trace.py), each at most what one stretch costs, and per step at
most as many gaps (the largest terms) as calls that cost a bucket or more on f and put B bytes or more
on the link: a smaller call (DDP's 128 B broadcast, ZeRO's 1-byte flags however long their latency)
leaves the bucket full for the next, which can still take only B. At a mild fabric
B / R is a large part of each collective (FSDP's 11 collectives per step on 1 gbit: 23 ms of 80 ms); at
a strong one the gaps (the compute between collectives) cap it, so the credit shrinks against the step:
this is the over-prediction at mild fabrics that vanishes at strong ones. The profiled steps run slower
than the timed ones (comm.overhead.ratio), so the gaps are divided by that ratio; the interval takes
both. C(f) is what the bucket can save at most: a rank's idle gap is the link's only while every rank is
idle, and a rank that enters a collective before a late peer (the ranks' skew, dur_s − dur_min_s of the
calls) starts spending the bucket before the collective can finish, and an isolated call does not
always send fast enough to use a full bucket: FSDP's records kept 50-77% of C on the CPU labs and 40-80%
on the one-GPU H100 lab (its own calls per fabric, before the gapped sweep existed), and a lone
3-rank all-gather of FSDP's sizes saved 45-68% of B/R at 2gbit on the CPU lab, while 1.5-6 MiB calls at
500mbit saved up to 2 B/R (benchmarks/relate/credit_probe.py; benchmarks/relate/results/cpu-lab/relate-credit). So
what a call realises is measured where it can be: `fabricbench sweep --gap G` times each call after
every rank idled G (>= B/R: the bucket refilled), and at each draining traced call's size the saving
against the back-to-back sweep, over min(B/R, G), is the fraction r(f) of a bucket a call realises
there (realised_fraction: the calls-weighted mean, clamped to [0, 1] once); the prediction takes
r(f) x C(f). Without a gapped sweep of f it takes C(f), the upper bound. The 95% interval spans the
whole bucket's credit (fast side) to none (slow side) either way. Fabrics without a bucket (every real
one) have C = 0; a trace without gaps (recorded before they were) gets none, flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.collectives import busbw_factor
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.relating.pricing import PricedCollective, Pricing


def bucket(fabric: str) -> tuple[int, float] | None:
    """(B, B / R): the link's token bucket in bytes and in seconds of its rate (None: no bucket here)."""
    try:
        fab = get_fabric(fabric)
    except UsageError:  # a name from imported records that is no fabric here: nothing known of a bucket
        return None
    burst = getattr(fab, "burst_bytes", None)
    return (burst, burst * 8 / fab.rate_bps) if burst and fab.rate_bps else None


def bucket_s(fabric: str) -> float | None:
    """B / R: seconds of the link's rate a full token bucket is worth (None: no bucket on this fabric)."""
    got = bucket(fabric)
    return got[1] if got else None


GAP_BUCKETS = 3.0  # a gapped sweep's idle gap in B/R: the bucket refilled whole, whatever the call left in it
MIN_GAP_S = 0.005  # and never shorter: the ranks' own start skew is a few ms


def measuring_gap_s(fabric: str) -> float | None:
    """The idle gap of `sweep --gap` that measures what a call realises on `fabric` (realised_fraction):
    GAP_BUCKETS x B/R, at least MIN_GAP_S; None where the fabric has no bucket (no credit to measure)."""
    b = bucket_s(fabric)
    return max(MIN_GAP_S, GAP_BUCKETS * b) if b else None


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


def link_credit(gaps: Gaps | None, pricing: Pricing, entries: list[PricedCollective], comm_s: float,
                scaled: bool, realised: float | None = None) -> float:
    """C on pricing's fabric: the gaps' credit, counting only as many per step as calls drain a bucket,
    times the fraction of a bucket a call realises there where it was measured (`realised`, from
    realised_fraction), else all of it."""
    bk = bucket(pricing.fabric)
    if gaps is None or bk is None:
        return 0.0
    draining = sum(e.calls_per_step for e in _draining(entries, bk))
    c = gaps.credit(bucket_s=bk[1], comm_s=comm_s, scaled=scaled, draining_per_step=draining)
    return c * (1.0 if realised is None else realised)


def _draining(entries: list[PricedCollective], bk: tuple[int, float]) -> list[PricedCollective]:
    """The calls that can empty a bucket: they cost B/R or more and put B bytes or more on the link (its
    ranks' sends together: S x busbw factor each, on one shared loopback). A smaller call leaves the bucket
    full for the next; so does a latency-bound one, such as ZeRO's 1-byte overflow flags, which cost 0.6 ms
    a call on the H100 lab's shaped links, more than B/R at 6 Gbit/s, and send nothing a bucket notices."""
    burst, b = bk
    return [e for e in entries if (e.time_s or 0.0) >= b
            and e.bytes * (busbw_factor(e.op, e.group_size) or 0.0) * e.group_size >= burst]


@dataclass(frozen=True, kw_only=True)
class Realised:
    """What a call after an idle gap saved on one fabric, measured: back-to-back sweep less `sweep --gap`
    at each draining traced call's size, as a fraction of the bucket the gap refilled (min(B/R, gap))."""

    fraction: float  # calls-weighted mean of each size's saving / refill, clamped to [0, 1]
    calls: float  # draining calls per step it covers
    of_calls: float  # draining calls per step in all
    per_size: tuple[tuple[str, int, float], ...]  # (op, S, that size's fraction before the clamp)

    def note(self, fabric: str) -> str:
        sizes = ", ".join(f"{op} {s} B {f:.2f}" for op, s, f in self.per_size)
        return (f"on {fabric}: a call after an idle gap realised {self.fraction:.2f} of the token bucket in the "
                f"sweep with --gap ({sizes}; {self.calls:g} of {self.of_calls:g} draining calls per step "
                f"measured), so the link credit is that fraction of the gaps' B/R")


def realised_fraction(gapped, pricing: Pricing) -> Realised | None:
    """The link credit a call realises on pricing's fabric, from the gapped curves (SweepCurves.gapped) at
    the sizes of its draining entries: None where the fabric has no bucket or no gapped sweep covers a draining
    call (credit.py then assumes a full bucket per gap, the upper bound).

    Why measured: the bucket's B/R per gap is what a link could give; what a call takes depends on how it
    sends (a ring's steps, the host copies of gloo's CUDA path, a sweep's own pauses that already refill it
    a little): FSDP's calls kept 40-80% of it on the H100 lab and a lone 3-rank all-gather 45-68% at 2gbit
    on the CPU lab, and priced as all of it FSDP came out 5-10% fast on every shaped rate."""
    bk = bucket(pricing.fabric)
    if gapped is None or bk is None:
        return None
    b = bk[1]
    per_size, weight, total = [], 0.0, 0.0
    draining = _draining(list(pricing.entries), bk)
    for e in draining:
        if e.curve is None:
            continue
        g = gapped.get(pricing.fabric, e.curve.op, e.curve.dtype, e.curve.nranks)
        if g is None:
            continue
        t_b2b, _ = e.curve.time_at(e.bytes)
        t_gap, _ = g.time_at(e.bytes)
        f = (t_b2b - t_gap) / min(b, g.gap_s)
        per_size.append((e.op, e.bytes, f))
        weight += e.calls_per_step
        total += e.calls_per_step * f
    if weight <= 0:
        return None
    # clamped once, on the mean: each size's saving is a difference of two medians, noisy around small
    # values, and clamping each first would turn that noise into credit
    return Realised(fraction=min(1.0, max(0.0, total / weight)), calls=weight,
                    of_calls=sum(e.calls_per_step for e in draining),
                    per_size=tuple(per_size))
