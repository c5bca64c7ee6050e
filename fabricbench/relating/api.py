"""Relate's model on fabricbench's own runs: observed and predicted training slowdown per strategy and fabric.

    import fabricbench
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=["sweeps.jsonl", "train.jsonl"]))  (relate_run.py)
    for row in res.rows:
        print(row.strategy, row.fabric, row.observed_slowdown, row.predicted_slowdown)
    res.problems      # exactly what did not match, one sentence each

The model (fabricbench/relating/model.py, pricing.py, credit.py) is calibrated on the reference fabric alone:

    T_step(f) = max(T_compute + T_comm(f) − H(f), T_comm(f)),   T_compute = T_step(ref) − e × T_comm(ref),
    H(f) = min((1 − e) × T_comm(f), max(W, (1 − e) × T_comm(ref)))   (the communication hidden behind compute;
    W the reference's overlap window where communication has resources of its own, else 0: window.py)

T_comm(f) prices the reference run's communication trace on f's sweep, less the credit C(f) a token-bucket
link (shaped:RATE) banks in the reference's idle gaps and spends at the start of the next collective; e is the exposed fraction from
the reference run's overlap timeline (1, an upper bound, where the trace has none). The default
reference is the fastest fabric by trace-weighted busbw among those with a sweep and a train run.

This module reads and joins the inputs, picks the reference and calibrates on it; rows.py builds each row
from that frozen Calibration and one fabric's prices, and returns its flags and notes; relate_run.py is the
public call (RelateConfig), which takes this path or a profiled loop's (usertrace.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.relating import calls as own_calls
from fabricbench.relating import concurrency
from fabricbench.relating import coverage as cover
from fabricbench.relating import inputs
from fabricbench.relating import job as job_prices
from fabricbench.relating import window as overlap
from fabricbench.relating.inputs import Observed, Workload
from fabricbench.relating.credit import Gaps, bucket_s, realised_fraction
from fabricbench.relating.curves import SweepCurves
from fabricbench.relating.model import FORMULA
from fabricbench.relating.pricing import Pricing, price
# the row and its flags are built in rows.py; their names stay importable here, from the public face
from fabricbench.relating.rows import (CREDIT_MEASURED, LINK_CREDIT, NO_COMMUNICATION, OVERLAP_WINDOW,  # noqa: F401
                                       PLACEMENT, PREDICTED_ONLY, REFERENCE, SHARED_LINK, UPPER_BOUND,
                                       WINDOW_MATTERS, Calibration, OnFabric, RelateRow, build, trace_bytes,
                                       trace_dtype)
from fabricbench.results.schema import CollectiveResult
from fabricbench.training.calltimes import as_dicts


@dataclass(kw_only=True)
class RelateResult:
    reference: str
    rows: list[RelateRow]
    problems: list[str]
    formula: str = FORMULA
    # per strategy (workload): the reference run's own calls against the sweep's price (calls.py)
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def coverage(self) -> cover.Coverage:
        """How many held-out observed steps lie inside their predicted 95% interval (coverage.py)."""
        return cover.coverage(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "formula": self.formula, "rows": [r.to_dict() for r in self.rows],
                "coverage": self.coverage.to_dict(), "calls": list(self.calls),
                "problems": list(self.problems)}


def relate_records(records_or_paths: Any, reference: str | None = None, *,
                   overlap_window: bool | None = None) -> RelateResult:
    """Join sweep/compare records with train records by fabric, nranks and dtype; predict every fabric's
    step from the reference's. Raises UsageError for input that cannot be related at all.

    overlap_window: None, where communication has resources of its own (window.applies), a slower fabric
    hides up to the reference's overlap window (window.py); True, wherever the trace gives one; False, never
    (no more than the reference hid)."""
    read_problems: list[str] = []
    got = inputs.load(records_or_paths, read_problems)
    if not got.trains:
        raise UsageError("no train records among the inputs; add a `fabricbench train --out FILE` results file")
    observed, problems = inputs.observations(got.trains)
    return relate_observed(observed, got.collectives, reference, problems=read_problems + problems,
                           overlap_window=overlap_window)


def sweep_command(fabric: str) -> str:
    """The command that measures what a fabric lacks, for fabricbench's own train records."""
    return f"fabricbench sweep --fabric {fabric} --out FILE"


def relate_observed(observed: list[Observed], collectives: list[CollectiveResult], reference: str | None = None, *,
                    problems: list[str] | None = None, overlap_window: bool | None = None,
                    sweep_for: Callable[[str], str] = sweep_command) -> RelateResult:
    """relate_records() from observations already read: fabricbench's own train runs (inputs.observations) or a
    profiler trace of any loop (usertrace.py); `sweep_for` names the command that sweeps a fabric they lack."""
    problems = list(problems or [])
    if not collectives:
        raise UsageError("no sweep records (kind collective) among the inputs; add a `fabricbench sweep --out FILE` "
                         "or `fabricbench compare --out FILE` results file")
    swept_recs, job_recs = job_prices.split(collectives)  # a job's observed calls calibrate prices (job.py)
    curves = SweepCurves.from_records(swept_recs)
    job_curves = SweepCurves.from_records(job_recs) if job_recs else None
    if not curves and curves.gapped:
        raise UsageError("every sweep record was timed after an idle gap (sweep --gap: the link credit's "
                         "measurement, never a price); add the same sweep without --gap")
    if not curves:
        raise UsageError(f"none of the {len(collectives)} sweep records has a measured time (status ok)")
    swept = curves.fabrics()
    trained = list(dict.fromkeys(o.fabric for o in observed))
    for fab in trained:
        if fab not in swept:
            names = sorted({o.strategy for o in observed if o.fabric == fab})
            problems.append(f"no sweep for fabric {fab} (train runs of {', '.join(names)}): its step cannot be "
                            f"predicted; sweep it with `{sweep_for(fab)}`")
    ref = _reference(reference, observed, curves, swept, trained)
    rows: list[RelateRow] = []
    found_calls: list[dict[str, Any]] = []
    by_key = {(o.workload, o.strategy, o.fabric): o for o in observed}
    for wl, strategy in dict.fromkeys((o.workload, o.strategy) for o in observed):
        base = by_key.get((wl, strategy, ref))
        if base is None:
            problems.append(f"{strategy} ({wl.label()}) has no train run on the reference fabric {ref}: "
                            f"nothing to calibrate its prediction on")
            continue
        got, notes, calls = _strategy_rows(base, by_key, curves, swept, overlap_window=overlap_window,
                                           job_curves=job_curves)
        rows.extend(got)
        problems.extend(notes)
        found_calls.extend([calls] if calls is not None else [])
    if job_curves is not None and ref not in job_curves.fabrics():
        problems.append(f"the job's observed collectives ran on {', '.join(job_curves.fabrics())}, not on the "
                        f"reference {ref}: nothing to calibrate the prices against (job.py)")
    return RelateResult(reference=ref, rows=rows, problems=list(dict.fromkeys(problems)), calls=found_calls)


def _reference(asked: str | None, observed: list[Observed], curves: SweepCurves, swept: list[str],
               trained: list[str]) -> str:
    both = [f for f in swept if f in trained]
    if asked is not None:
        known = list(dict.fromkeys(swept + trained))
        if asked not in known:
            raise UsageError(f"unknown reference fabric {asked!r}; the records have {_fabric_list(swept, trained)}")
        if asked not in both:
            lacks = "sweep" if asked not in swept else "train run"
            raise UsageError(f"reference fabric {asked} has no {lacks} to calibrate on; choose one with both: "
                             f"{', '.join(both) or 'none'}")
        return asked
    if not both:
        raise UsageError(f"no fabric has both a sweep and a train run ({_fabric_list(swept, trained)}); "
                         f"relate calibrates on one that has both")
    return _fastest(both, observed, curves)


def _fabric_list(swept: list[str], trained: list[str]) -> str:
    out = []
    for f in dict.fromkeys(swept + trained):
        has = [w for w, names in (("sweep", swept), ("train", trained)) if f in names]
        out.append(f"{f} ({', '.join(has)})")
    return ", ".join(out)


def _fastest(candidates: list[str], observed: list[Observed], curves: SweepCurves) -> str:
    """The candidate with the least communication time over every traced collective that all of them can
    price (= the highest trace-weighted busbw); else the highest busbw at the largest swept sizes."""
    traced = [c for o in observed if o.comm for c in (o.comm.get("collectives") or [])]
    if traced:
        pricings = {f: price(traced, curves, fabric=f) for f in candidates}
        ok = [all(pricings[f].entries[i].time_s is not None for f in candidates) for i in range(len(traced))]
        if any(ok):
            totals = {f: sum(e.step_time_s for e, k in zip(pricings[f].entries, ok) if k) for f in candidates}
            return min(candidates, key=lambda f: totals[f])

    def top_busbw(f: str) -> float:
        vals = [c.busbw_gbps(c.sizes[-1], c.times_s[-1]) for c in curves.on(f)]
        return max(vals) if vals else 0.0

    return max(candidates, key=top_busbw)


def _strategy_rows(base: Observed, by_key: dict[tuple[Workload, str, str], Observed], curves: SweepCurves,
                   swept: list[str], *, overlap_window: bool | None = None, job_curves: SweepCurves | None = None
                   ) -> tuple[list[RelateRow], list[str], dict[str, Any] | None]:
    """Every swept fabric's row for base's (workload, strategy), calibrated on base (the reference run); the
    sentences they add to the problems; the reference run's own calls against the sweep (calls.py), where
    it has them."""
    wl, strategy, ref = base.workload, base.strategy, base.fabric
    who = f"{strategy} ({wl.label()})"
    comm = base.comm
    if comm is None:
        return [], [f"{who} on the reference {ref}: the train record has no `comm` trace (recorded before "
                    f"fabricbench traced collectives); rerun `fabricbench train`"], None
    collectives = list(comm.get("collectives") or [])
    flags: list[str] = []
    notes: list[str] = []
    timeline = comm.get("timeline") or None
    e = timeline.get("exposed_fraction") if isinstance(timeline, dict) else None
    if e is None:
        e = 1.0
        if collectives:
            flags.append(UPPER_BOUND)
            notes.append(f"{who} on {ref}: the trace has no overlap timeline, so e = 1 (every second of "
                         f"communication exposed): predictions are upper bounds")
    e = min(1.0, max(0.0, float(e)))
    if not collectives:
        flags.append(NO_COMMUNICATION)
        note = comm.get("note") or "no collective in the trace"
        notes.append(f"{who}: {note}; every fabric predicts the reference's step")
    raw_ref = price(collectives, curves, fabric=ref, nranks=wl.nranks)
    notes.extend(raw_ref.flags)
    factors = _factors(base, raw_ref, job_curves)
    flags.extend(factors.flags)
    notes.extend(factors.notes)
    on_ref = factors.shift(raw_ref)
    shared_ref, _ = concurrency.saving(as_dicts(comm.get("calls")), raw_ref, factors.ks)
    if on_ref.time_s - shared_ref > base.step_s:
        notes.append(f"{who} on the reference {ref}: its sweep prices {on_ref.time_s - shared_ref:.4g} s of "
                     f"communication per step, more than the observed {base.step_s:.4g} s step; the sweep and "
                     f"the training disagree (another dtype? busier machine?)")
    cal = Calibration(base=base, exposed_fraction=e, on_ref=on_ref, ref_bytes=trace_bytes(comm),
                      dtype=trace_dtype(collectives), flags=tuple(flags), window=_window(base, e, overlap_window),
                      gaps=Gaps.from_timeline(timeline, (comm.get("overhead") or {}).get("ratio")),
                      shared_s=shared_ref, realised=realised_fraction(curves.gapped, on_ref))
    rows, more = _fabric_rows(cal, raw_ref, factors, by_key, curves, swept)
    return rows, notes + more, factors.calls


def _fabric_rows(cal: Calibration, raw_ref: Pricing, factors: _Factors,
                 by_key: dict[tuple[Workload, str, str], Observed], curves: SweepCurves, swept: list[str]
                 ) -> tuple[list[RelateRow], list[str]]:
    """The row of each swept fabric that can price the reference's trace, the reference's first, then by
    busbw; and the sentences they add to the problems."""
    base = cal.base
    wl, ref, who = base.workload, base.fabric, f"{base.strategy} ({base.workload.label()})"
    assert base.comm is not None
    collectives = list(base.comm.get("collectives") or [])
    first = as_dicts(base.comm.get("calls"))  # the reference's calls: which ran together (concurrency.py)
    rows: list[RelateRow] = []
    notes: list[str] = []
    for fab in swept:
        raw_fab = raw_ref if fab == ref else price(collectives, curves, fabric=fab, nranks=wl.nranks)
        on_fab = cal.on_ref if fab == ref else factors.shift(raw_fab)
        if fab != ref:
            notes.extend(on_fab.flags)
        elsewhere = _placement_note(base, curves, fab)
        if elsewhere:
            notes.append(elsewhere)
        if cal.gaps is None and collectives and bucket_s(fab) is not None:
            notes.append(f"{who} on {fab}: the reference's trace has no idle gaps (recorded before traces had "
                         f"them), so the link credit of {fab}'s token bucket is not priced: the prediction there is "
                         f"high by up to {bucket_s(fab) * 1e3:.2g} ms per collective; rerun `fabricbench train` "
                         f"on {ref}")
        if collectives and not any(r.time_s is not None and f.time_s is not None
                                   for r, f in zip(cal.on_ref.entries, on_fab.entries)):
            notes.append(f"{who} on {fab}: none of its traced collectives can be priced on both {fab} and the "
                         f"reference {ref}; no row")
            continue
        row, more = build(cal, OnFabric(
            fabric=fab, own=by_key.get((wl, base.strategy, fab)), priced=on_fab,
            shared_s=cal.shared_s if fab == ref else concurrency.saving(first, raw_fab, factors.ks)[0],
            realised=cal.realised if fab == ref else realised_fraction(curves.gapped, on_fab),
            placement_differs=elsewhere is not None))
        rows.append(row)
        notes.extend(more)
    rows.sort(key=lambda r: (r.fabric != ref, -(r.busbw_ratio or 0.0)))
    return rows, notes


def _window(base: Observed, e: float, asked: bool | None) -> overlap.Window | None:
    """The reference's overlap window for model.hidden (window.py), where asked and it applies and some
    communication hid (e < 1); None: no more hides than the reference hid."""
    comm = base.comm or {}
    if asked is False or e >= 1.0 or (asked is None and not overlap.applies(comm, base.cores_per_rank)):
        return None
    return overlap.overlap_window(comm)


def _placement_note(base: Observed, curves: SweepCurves, fab: str) -> str | None:
    """A sentence when `fab`'s sweep at the run's rank count placed its ranks elsewhere than the run did."""
    got = curves.placements.get((fab, base.workload.nranks))
    if not got or base.placement is None or base.placement in got:
        return None
    return (f"{base.strategy} ({base.workload.label()}) on {fab}: the sweep's {base.workload.nranks} ranks ran on "
            f"{', '.join(sorted(got))}, the training's on {base.placement}: the price is another placement's; "
            f"sweep with the train run's --gpus")


@dataclass(frozen=True, kw_only=True)
class _Factors:
    """How the reference run's own evidence moves the sweep's prices: k per traced collective from a job's
    observed calls where it has them (job.py); δ per traced collective from the run's own calls where their
    ratio to the sweep is stable and no job calibrated it (calls.py); the spread of each δ in seconds, which
    widens the prices' intervals. With the flags and sentences that say so, and the run's calls as found."""

    ks: list[float | None]
    deltas: list[float | None]
    spread: list[float]
    flags: list[str]
    notes: list[str]
    calls: dict[str, Any] | None  # RelateResult.calls' entry for this strategy; None: no calls of its own

    def shift(self, raw: Pricing) -> Pricing:
        """A fabric's raw prices, calibrated as the reference's were."""
        return own_calls.shift(job_prices.calibrate(raw, self.ks), self.deltas, self.spread)


def _factors(base: Observed, raw_ref: Pricing, job_curves: SweepCurves | None) -> _Factors:
    who = f"{base.strategy} ({base.workload.label()})"
    flags: list[str] = []
    notes: list[str] = []
    ks = job_prices.factors(raw_ref, job_curves) if job_curves is not None else [None] * len(raw_ref.entries)
    if any(k is not None for k in ks):
        notes.append(job_prices.note(who, ks, raw_ref.entries, base.fabric))
        flags.append(job_prices.CALIBRATED)
    found, shared = own_calls.ratios(base.comms or ((base.comm,) if base.comm else ()), raw_ref)
    notes.extend(own_calls.note(who, base.fabric, found, shared))
    calls = None
    if found:
        calls = {"strategy": base.strategy, "model": base.workload.model, "nranks": base.workload.nranks,
                 "reference": base.fabric, "shared_calls": shared,
                 "by_op": own_calls.by_op(found), "by_size": [c.to_dict() for c in found]}
    own = [None if k is not None else d for k, d in zip(ks, own_calls.offsets(raw_ref, found))]
    if any(d is not None for d in own):
        flags.append(own_calls.SELF_CALIBRATED)
    if any(c.disagrees for c in found):
        flags.append(own_calls.DISAGREE)
    spread = [0.0 if k is not None else w for k, w in zip(ks, own_calls.spreads(raw_ref, found))]
    return _Factors(ks=ks, deltas=own, spread=spread, flags=flags, notes=notes, calls=calls)
