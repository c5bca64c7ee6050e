"""Pricing a communication trace on a fabric's sweep (its curves, curves.py).

    fabricbench relate sweeps.jsonl train.jsonl --reference default

A train record's trace (`comm.collectives`) says which collectives one step issues:
op, S, dtype, group size and calls per step. Pricing the trace on fabric f:

    T_comm(f) = Σ_c calls_c × t_f(op_c, S_c)

with t_f read off f's swept curve of the op (curves.py: interpolated in log-log, extrapolated and
flagged outside the swept range). Collectives that cannot be priced on both fabrics are left out of both
sums, and said so. The trace-weighted bus-bandwidth ratio compares the fabrics at the sizes the strategy
really sends:

    busbw_eff(f) = Σ_c calls_c × S_c × factor(op_c, n_c) / Σ_c calls_c × t_f(op_c, S_c)
    busbw_ratio  = busbw_eff(f) / busbw_eff(r)                 (= T_comm(r) / T_comm(f))

with the nccl-tests bus-bandwidth factors of fabricbench/collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from fabricbench.collectives import busbw_factor
from fabricbench.relating.curves import (ABOVE, BELOW, DTYPE_SUBSTITUTED, EXACT, FAR, INTERPOLATED, NEAR_FACTOR,
                                         UNPRICED, Curve, SweepCurves, size_3sig)


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
        curve, why = curves.find(fabric, op, dt, n, nbytes)
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
    shown = size_3sig(sizes[0]) if len(sizes) == 1 else f"{size_3sig(sizes[0])}-{size_3sig(sizes[-1])}"
    what = f"{op} {dtype} on {n} ranks at {shown}"
    per_step = sum(e.calls_per_step * e.bytes for e in group)
    curve = group[0].curve
    if status == UNPRICED:
        return f"{curves.missing(fabric, op, dtype, n)}: {what} ({size_3sig(int(per_step))}/step) not priced"
    assert curve is not None
    if status == DTYPE_SUBSTITUTED:
        return (f"fabric {fabric}: {what} priced from the {curve.dtype} sweep at the same bytes "
                f"(no {dtype} sweep of {op})")
    if status == BELOW:
        return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} lies below the smallest "
                f"swept size {size_3sig(curve.sizes[0])} (extrapolated: that size's time)")
    if status == ABOVE:
        return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} lies above the largest "
                f"swept size {size_3sig(curve.sizes[-1])} (extrapolated at that size's bandwidth)")
    assert status == FAR
    return (f"fabric {fabric}: the sweep has no sizes near the trace's: {what} is more than {NEAR_FACTOR:g}x "
            f"from the nearest swept sizes ({curve.span()}, interpolated)")
