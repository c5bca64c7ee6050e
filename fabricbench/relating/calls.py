"""The run's own collectives as ground truth: each traced call's time against the sweep's price of the same
op, size, dtype and ranks on the reference fabric, and a calibration per op and size where it holds.

    fabricbench relate sweeps.jsonl train.jsonl --json     # "calls": per strategy, the ratios below

The reference run's trace times every collective it issued (training/calltimes.py: the NCCL kernel on GPU,
gloo's worker event on the host; per call the shortest interval over the ranks, so that a rank's wait for
a late peer is not counted). For each call that ran alone (concurrency.py: no other collective in flight
beside it; calls that shared the link are priced by concurrency.py instead):

    ratio = t_call / t_sweep,ref(op, S, dtype, n)

Per (op, S, dtype, n): the median ratio over its calls, their range, and the median per repeat (every
profiled step of every run of the reference is a repeat). Where it is stable (at least MIN_REPEATS
repeats, each repeat's median within ±STABLE of the median of all) the difference it makes calibrates that
collective's price on every fabric, by adding it:

    t_f(op, S) ← t_sweep,f(op, S) + δ,    δ = (ratio − 1) × t_sweep,ref(op, S)

Added, not multiplied: what a run's call saves or pays against a sweep's is per-call work off the wire
(the sweep's host sync and copies back, a training call's stream already in flight), which no fabric
changes. Measured on the one-GPU H100 lab (each held-out run's own calls against its own fabric's
sweep): ZeRO-2's calls took 0.62-0.69 of the sweep on default and 0.83-0.86
on every shaped rate, so the reference's ratio, multiplied, priced the shaped fabrics 25% low (ZeRO-2
-7..-17% on the step); the sweep's price less the link credit plus the reference's δ came within 1-2 ms
of the calls on every fabric. Where the ratio is not stable the sweep's price is used as it is and a note
says so. (A job's observed calls, job.py, still scale: they are another run's, not this one's.)

Where the calls' range and the sweep's own 95% interval at that size do not meet, the sweep and the run
disagree by more than their spreads: the row is flagged DISAGREE and the note names the collective
(another dtype, a size outside the sweep's, a busier host, another algorithm).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from fabricbench.relating.concurrency import Key, key_of, stretches
from fabricbench.relating.curves import size_3sig
from fabricbench.relating.pricing import Pricing
from fabricbench.training.calltimes import as_dicts

STABLE = 0.20  # each repeat's median ratio within ±20% of the median of all: a calibration, not noise
MIN_REPEATS = 2
SELF_CALIBRATED = "self-calibrated"  # RelateRow flag: prices shifted by the run's own calls' δ
DISAGREE = "sweep disagrees"  # RelateRow flag: a traced collective's calls and its sweep price do not meet


@dataclass(kw_only=True)
class CallRatio:
    """The run's calls of one (op, S, dtype, n) against the sweep's price on the reference."""

    op: str
    bytes: int
    dtype: str
    group_size: int
    swept_s: float  # the sweep's price of one call on the reference
    sweep_rel: float  # its relative 95% half-width
    ratio: float  # median over the calls of t_call / swept_s
    lo: float  # the calls' lowest ratio
    hi: float  # and highest
    calls: int
    repeat_ratios: list[float] = field(default_factory=list)  # median per repeat (run x profiled step)
    stable: bool = False
    disagrees: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        return f"{self.op} {self.dtype} {size_3sig(self.bytes)} on {self.group_size} ranks"


def _samples(comms: Sequence[dict[str, Any]]) -> tuple[dict[Key, list[tuple[tuple[int, int], float]]], int]:
    """(per key, (repeat, seconds) of every call that ran alone; how many calls ran beside another)."""
    out: dict[Key, list[tuple[tuple[int, int], float]]] = {}
    shared = 0
    for run, comm in enumerate(comms):
        for stretch in stretches(as_dicts(comm.get("calls"))):
            if len(stretch) > 1:
                shared += len(stretch)
                continue
            r = stretch[0]
            t = r.get("dur_min_s") if r.get("dur_min_s") is not None else r.get("dur_s")
            if t is not None and t > 0:
                out.setdefault(key_of(r), []).append(((run, int(r["step"])), float(t)))
    return out, shared


def ratios(comms: Sequence[dict[str, Any]], on_ref: Pricing) -> tuple[list[CallRatio], int]:
    """(a CallRatio per traced (op, S, dtype, n) with timed solo calls and a price on the reference, calls
    left out because they ran beside another); `comms`: every reference run's comm section."""
    samples, shared = _samples(comms)
    out = []
    for e in on_ref.entries:
        got = samples.get((e.op, e.bytes, e.dtype, e.group_size))
        if not got or not e.time_s or e.time_s <= 0:
            continue
        rs = [t / e.time_s for _, t in got]
        per: dict[tuple[int, int], list[float]] = {}
        for (rep, t) in got:
            per.setdefault(rep, []).append(t / e.time_s)
        med = statistics.median(rs)
        reps = [statistics.median(v) for _, v in sorted(per.items())]
        stable = len(reps) >= MIN_REPEATS and all(abs(r / med - 1) <= STABLE for r in reps)
        lo, hi = min(rs), max(rs)
        out.append(CallRatio(op=e.op, bytes=e.bytes, dtype=e.dtype, group_size=e.group_size, swept_s=e.time_s,
                             sweep_rel=e.rel, ratio=med, lo=lo, hi=hi, calls=len(rs), repeat_ratios=reps,
                             stable=stable, disagrees=lo > 1 + e.rel or hi < 1 - e.rel))
    return out, shared


# a calibrated call never prices below this share of its sweep price (δ measured on a slow reference,
# added on a much faster fabric, could otherwise reach zero or below)
FLOOR = 0.1


def offsets(on_ref: Pricing, found: Sequence[CallRatio]) -> list[float | None]:
    """δ per entry of the reference's pricing, seconds per call: (stable ratio − 1) × the sweep's price of
    its (op, S, dtype, n) on the reference, else None."""
    by = {(c.op, c.bytes, c.dtype, c.group_size): c for c in found}
    out: list[float | None] = []
    for e in on_ref.entries:
        c = by.get((e.op, e.bytes, e.dtype, e.group_size))
        out.append((c.ratio - 1.0) * c.swept_s if c is not None and c.stable else None)
    return out


def spreads(on_ref: Pricing, found: Sequence[CallRatio]) -> list[float]:
    """Per entry, the half-range of a stable δ's repeats in seconds per call (0 where none): the
    calibration's own uncertainty, which widens the calibrated price's interval (shift)."""
    by = {(c.op, c.bytes, c.dtype, c.group_size): c for c in found if c.stable}
    out = []
    for e in on_ref.entries:
        c = by.get((e.op, e.bytes, e.dtype, e.group_size))
        out.append((max(c.repeat_ratios) - min(c.repeat_ratios)) / 2 * c.swept_s if c is not None else 0.0)
    return out


def shift(p: Pricing, deltas: Sequence[float | None], spread_s: Sequence[float]) -> Pricing:
    """p with δ added to each calibrated entry's time (at least FLOOR of its price), and each entry's
    relative 95% half-width at least the calibration's spread over the time it now has."""
    entries = []
    for e, d, w in zip(p.entries, deltas, spread_s):
        if e.time_s is None or d is None:
            entries.append(e)
            continue
        t = max(e.time_s + d, FLOOR * e.time_s)
        entries.append(dataclasses.replace(e, time_s=t, rel=max(e.rel * e.time_s / t, w / t)))
    return dataclasses.replace(p, entries=tuple(entries))


def by_op(found: Sequence[CallRatio]) -> dict[str, dict[str, Any]]:
    """Per op: the calls' time over the sweep's price, summed over sizes (weighted by the calls' time)."""
    out: dict[str, dict[str, Any]] = {}
    for c in found:
        d = out.setdefault(c.op, {"traced_s": 0.0, "swept_s": 0.0, "calls": 0, "lo": c.lo, "hi": c.hi,
                                  "stable": True})
        d["traced_s"] += c.ratio * c.swept_s * c.calls
        d["swept_s"] += c.swept_s * c.calls
        d["calls"] += c.calls
        d["lo"], d["hi"] = min(d["lo"], c.lo), max(d["hi"], c.hi)
        d["stable"] = d["stable"] and c.stable
    for d in out.values():
        d["ratio"] = d["traced_s"] / d["swept_s"] if d["swept_s"] > 0 else None
    return out


def note(who: str, ref: str, found: Sequence[CallRatio], shared: int) -> list[str]:
    """Sentences for the problems list: the ratios, what calibrated, what did not and why, disagreements."""
    if not found:
        return []
    ops = by_op(found)
    parts = ", ".join(f"{op} {d['ratio']:.2f}x [{d['lo']:.2f}-{d['hi']:.2f}] over {d['calls']} calls"
                      for op, d in ops.items() if d["ratio"] is not None)
    lines = [f"{who} on {ref}: the run's own calls against the sweep's price (t_call / t_sweep): {parts}"
             + (f"; {shared} calls ran beside another and are priced as a shared link instead" if shared else "")]
    unstable = [c for c in found if not c.stable]
    if unstable:
        lines.append(f"{who}: not calibrated (ratio not stable across repeats: fewer than {MIN_REPEATS} repeats, or "
                     f"a repeat off the median by more than {STABLE:.0%}): "
                     + "; ".join(f"{c.label()} {', '.join(f'{r:.2f}' for r in c.repeat_ratios)}" for c in unstable))
    for c in found:
        if c.disagrees:
            lines.append(f"{who}: sweep and run disagree beyond their spreads: {c.label()}: the run's calls took "
                         f"{c.lo:.2f}-{c.hi:.2f}x the sweep's {c.swept_s * 1e3:.3g} ms (±{c.sweep_rel:.0%})")
    return lines
