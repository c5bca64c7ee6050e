"""Relate on imported job data: per-size prices calibrated on the collectives a real job was observed to run.

    fabricbench import inspector/ --out job.jsonl            # a job's collectives (NCCL Inspector's files)
    fabricbench relate sweeps.jsonl train.jsonl job.jsonl

A sweep times each collective alone, back to back, in processes that do nothing else. A job's own calls
(collective records marked observed in a job: `"observed": "job"`, e.g. NCCL Inspector's per-call records
once imported) were timed where the job ran, beside its compute, with its buckets in flight and its process
state. Where such records exist on the reference fabric for a traced (op, nranks) near a traced size, the
calibration factor

    k(op, S) = t_job(op, S) / t_sweep,ref(op, S)           (each the median time of one call of S)

multiplies that collective's price on every fabric: T_comm(f) = Σ calls × k × t_f(op, S). What the job paid
beyond the sweep's price on the reference (contention, concurrency) is taken to scale with the wire, as
the time it multiplies does. The job's records never become sweep points (they are not a sweep of f).

When it helps: the job's collectives ran at a different speed than the sweep's on the same fabric (a busy
host, buckets overlapping, another algorithm chosen in the job), and the traced sizes are ones the job ran,
on the reference fabric. When it does not: the job's times include waiting for late peers (a rank's skew,
which no fabric changes: k then over-prices every fabric alike), the job ran other sizes (a size more than
NEAR_FACTOR from the job's is left uncalibrated), or the job ran on another fabric than the reference
(nothing to calibrate against: said in the problems).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from fabricbench.relating.curves import EXACT, INTERPOLATED, SweepCurves
from fabricbench.relating.pricing import PricedCollective, Pricing
from fabricbench.results.schema import CollectiveResult

CALIBRATED = "job-calibrated"  # RelateRow flag: prices scaled by k(op, S) from a job's observed calls


def observed_in_job(r: CollectiveResult) -> bool:
    """A collective record of a job's own call (imported), not of a sweep."""
    return r.context.get("observed") in ("job", True)


def split(results: Iterable[CollectiveResult]) -> tuple[list[CollectiveResult], list[CollectiveResult]]:
    """(swept, observed in a job)."""
    swept, job = [], []
    for r in results:
        (job if observed_in_job(r) else swept).append(r)
    return swept, job


def factors(ref: Pricing, job: SweepCurves) -> list[float | None]:
    """k per entry of the reference's pricing: the job's time over the sweep's at the entry's size, where the
    job has the (op, nranks) on the reference and a call size near it (curves.py's EXACT or INTERPOLATED)."""
    out: list[float | None] = []
    for e in ref.entries:
        curve, _ = job.find(ref.fabric, e.op, e.dtype, e.group_size, e.bytes)
        if curve is None or not e.time_s or e.bytes <= 0:
            out.append(None)
            continue
        t, status = curve.time_at(e.bytes)
        out.append(t / e.time_s if status in (EXACT, INTERPOLATED) else None)
    return out


def calibrate(p: Pricing, ks: list[float | None]) -> Pricing:
    """p with each entry's time multiplied by its k (entries without one as they were)."""
    assert len(ks) == len(p.entries)
    entries: list[PricedCollective] = [
        e if k is None or e.time_s is None else dataclasses.replace(e, time_s=e.time_s * k)
        for e, k in zip(p.entries, ks)]
    return dataclasses.replace(p, entries=tuple(entries))


def note(strategy: str, ks: list[float | None], entries: Iterable[Any], ref: str) -> str:
    """One sentence for the problems list: how much of the trace the job calibrated, and by what."""
    entries = list(entries)
    got = [(k, e) for k, e in zip(ks, entries) if k is not None]
    share = sum(e.step_time_s for _, e in got) / max(sum(e.step_time_s for e in entries), 1e-30)
    lo, hi = min(k for k, _ in got), max(k for k, _ in got)
    span = f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}-{hi:.2f}"
    return (f"{strategy}: prices calibrated on the job's observed collectives on {ref}: k = job / sweep = {span} on "
            f"{len(got)} of {len(entries)} traced collectives ({share:.0%} of the reference's swept T_comm)")
