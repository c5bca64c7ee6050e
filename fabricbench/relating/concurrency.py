"""Collectives in flight at the same time share the link: an overlapped stretch is priced as its bytes over
the fabric's bandwidth, not as the sum of its calls' isolated times, nor as the longest alone.

    fabricbench relate sweeps.jsonl train.jsonl      # T_comm(f) = Σ calls × k × t_f(op, S) − C(f) − O(f)

A sweep times one collective at a time. Training does not always: FSDP prefetches the next all-gather while
the reduce-scatter runs, DDP's buckets can be in flight together, and NCCL runs them on separate streams.
The reference run's per-call intervals (comm.calls, training/calltimes.py: rank 0's, per profiled step)
show which calls overlapped: a stretch is a maximal set of calls each of which began before the stretch's
last end. Calls alone in their stretch are priced as before. A stretch of several shares the link:

    W          = Σ_c w_c,   w_c = S_c × busbw factor(op_c, n)        (the stretch's bytes on the wire)
    t_shared   = Σ_c k_c × (w_c / W) × t_f(op_c, S_c × W / w_c)      (each call's share of the wire at the
                                                                      bandwidth the fabric reaches when the
                                                                      whole stretch's bytes cross it)
    price      = max(t_shared, max_c k_c × t_f(op_c, S_c))           (never less than its longest call alone)

For one op this is t_f(op, Σ S_c): one latency and the stretch's bytes at the fabric's bandwidth for that
volume. O(f) = Σ over stretches (Σ_c k_c × t_f(op_c, S_c) − price), per step (mean over the profiled steps),
is what sharing saves against the sum of isolated times; model.py takes it off T_comm. The stretches are the
reference's: a slower fabric may overlap calls the reference ran apart (or the reverse), which this cannot
see. Checked on a synthetic overlapped trace with a shaped link's curve (tests/unit/test_relate_calls.py).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from fabricbench.collectives import busbw_factor
from fabricbench.relating.pricing import PricedCollective, Pricing

Key = tuple[str, int, str, int]  # (op, bytes, dtype, group size) of a priced collective


def key_of(row: dict[str, Any]) -> Key:
    return (str(row["op"]), int(row["bytes"]), str(row["dtype"]), int(row["group_size"]))


def stretches(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """One run's comm.calls rows (as dicts) -> per step, the calls grouped into stretches of calls in flight
    together (module docstring); a call with no interval is a stretch of its own."""
    out: list[list[dict[str, Any]]] = []
    by_step: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_step.setdefault(int(r["step"]), []).append(r)
    for _, calls in sorted(by_step.items()):
        timed = sorted((r for r in calls if r.get("start_s") is not None and r.get("dur_s") is not None),
                       key=lambda r: r["start_s"])
        cur: list[dict[str, Any]] = []
        end = -math.inf
        for r in timed:
            if cur and r["start_s"] < end:
                cur.append(r)
            else:
                if cur:
                    out.append(cur)
                cur = [r]
            end = max(end, r["start_s"] + r["dur_s"]) if len(cur) > 1 else r["start_s"] + r["dur_s"]
        if cur:
            out.append(cur)
        out.extend([r] for r in calls if r.get("start_s") is None or r.get("dur_s") is None)
    return out


def shared_price(group: Sequence[tuple[PricedCollective, float]]) -> float:
    """The price of one stretch of (priced entry, k) pairs: max(t_shared, the longest alone)."""
    alone = [k * (e.time_s or 0.0) for e, k in group]
    wires = [e.bytes * (busbw_factor(e.op, e.group_size) or 0.0) for e, _ in group]
    total = sum(wires)
    if total <= 0 or any(e.curve is None for e, _ in group):
        return max(alone)
    shared = 0.0
    for (e, k), w in zip(group, wires):
        if w <= 0:
            continue
        assert e.curve is not None
        t, _ = e.curve.time_at(max(1, int(round(e.bytes * total / w))))
        shared += k * (w / total) * t
    return max(shared, max(alone))


def saving(rows: Sequence[dict[str, Any]], raw: Pricing, ks: Sequence[float | None]) -> tuple[float, int]:
    """(O(f), stretches of several calls): seconds per step that sharing the link saves against the sum of
    isolated prices, from one run's calls; `raw` is the fabric's uncalibrated pricing, ks its calibration
    per entry (None: 1). A stretch with a call that cannot be priced is left as it is."""
    by_key: dict[Key, tuple[PricedCollective, float]] = {}
    for e, k in zip(raw.entries, ks):
        if e.time_s is not None:
            by_key[(e.op, e.bytes, e.dtype, e.group_size)] = (e, 1.0 if k is None else k)
    steps = len({int(r["step"]) for r in rows}) or 1
    total, n = 0.0, 0
    for stretch in stretches(rows):
        if len(stretch) < 2:
            continue
        group = [by_key.get(key_of(r)) for r in stretch]
        if any(g is None for g in group):
            continue
        pairs = [g for g in group if g is not None]
        total += sum(k * (e.time_s or 0.0) for e, k in pairs) - shared_price(pairs)
        n += 1
    return total / steps, n


def overlap_share(rows: Sequence[dict[str, Any]]) -> float | None:
    """The share of timed calls that ran beside another (None without intervals)."""
    timed = [s for s in stretches(rows) if s[0].get("start_s") is not None]
    calls = sum(len(s) for s in timed)
    return sum(len(s) for s in timed if len(s) > 1) / calls if calls else None
