"""`fabricbench.relate`: observed and predicted training slowdown per strategy and fabric.

    import fabricbench
    res = fabricbench.relate(["sweeps.jsonl", "train.jsonl"], reference=None)
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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.relating import calls as own_calls
from fabricbench.relating import concurrency
from fabricbench.relating import coverage as cover
from fabricbench.relating import inputs
from fabricbench.relating import job as jobs
from fabricbench.relating import window as overlap
from fabricbench.relating.inputs import Observed, Workload
from fabricbench.measuring.stats import around, ratio_ci
from fabricbench.relating.credit import Gaps, Realised, bucket_s, realised_fraction
from fabricbench.relating.curves import SweepCurves
from fabricbench.relating.model import FORMULA, predict, predict_interval, step_formula
from fabricbench.relating.pricing import Pricing, price
from fabricbench.results.schema import CollectiveResult
from fabricbench.training.calltimes import as_dicts

# short codes in RelateRow.flags; the sentences that explain them are in RelateResult.problems
REFERENCE = "reference"
PREDICTED_ONLY = "predicted-only"
UPPER_BOUND = "e=1 upper bound"
NO_COMMUNICATION = "no communication"
LINK_CREDIT = "link credit"  # T_comm less a token-bucket link's banked credit (credit.py)
CREDIT_MEASURED = "credit measured"  # the credit is the fraction of a bucket a call realised in sweep --gap
PLACEMENT = "placement differs"  # the sweep's ranks ran elsewhere than the training's (curves.placement)
SHARED_LINK = "shared link"  # T_comm less what overlapped collectives save by sharing the link (concurrency.py)
OVERLAP_WINDOW = "overlap window"  # hidden communication capped by the reference's overlap window (window.py)
WINDOW_MATTERS = 0.005  # the window's flag and note where it moves a prediction by more than this share


@dataclass(kw_only=True)
class RelateRow:
    """One strategy on one fabric. Times in seconds; slowdowns and ratios against the reference."""

    strategy: str
    fabric: str
    reference: str
    model: str
    precision: str
    nranks: int
    dtype: str  # the trace's collective dtypes, most bytes first ("float32", "bfloat16+float32")
    observed_step_s: float | None  # median step time of the run(s) on this fabric; None: predicted-only
    predicted_step_s: float
    observed_slowdown: float | None  # observed_step_s / observed step on the reference
    predicted_slowdown: float  # predicted_step_s / observed step on the reference
    residual: float | None  # predicted / observed − 1
    busbw_ratio: float | None  # trace-weighted busbw here / on the reference (≤ 1: a slower fabric)
    busbw_gbps: float | None  # trace-weighted busbw here
    comm_bytes_per_step: int  # the trace's S × calls summed over its collectives
    comm_time_s: float  # T_comm predicted on this fabric from its sweep
    comm_time_ref_s: float  # T_comm on the reference, over the same collectives
    compute_s: float  # T_compute, calibrated on the reference
    exposed_fraction: float  # e used (from the reference run's timeline, or 1)
    exposed_fraction_observed: float | None  # this fabric's own run's timeline, where it has one
    throughput: float | None  # observed samples/s
    predicted_throughput: float | None  # global batch / predicted_step_s
    runs: int  # train runs combined into observed_step_s (0: predicted-only)
    predicted_only: bool
    flags: list[str] = field(default_factory=list)
    # 95% intervals [lo, hi], propagated from the inputs' (the runs' step intervals, the sweeps' per-size
    # ones) by interval arithmetic (model.predict_interval); None where an input has none
    predicted_step_ci95: list[float] | None = None
    predicted_slowdown_ci95: list[float] | None = None
    observed_slowdown_ci95: list[float] | None = None
    link_credit_s: float = 0.0  # C(f): what a token-bucket link's banked credit takes off T_comm (credit.py)
    shared_link_s: float = 0.0  # O(f): what overlapped collectives save by sharing the link (concurrency.py)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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


def relate(records_or_paths: Any, reference: str | None = None, *,
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
    """relate() from observations already read: fabricbench's own train runs (inputs.observations) or a
    profiler trace of any loop (usertrace.py); `sweep_for` names the command that sweeps a fabric they lack."""
    problems = list(problems or [])
    if not collectives:
        raise UsageError("no sweep records (kind collective) among the inputs; add a `fabricbench sweep --out FILE` "
                         "or `fabricbench compare --out FILE` results file")
    swept_recs, job_recs = jobs.split(collectives)  # a job's observed calls calibrate prices (job.py)
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
        rows.extend(_strategy_rows(base, by_key, curves, swept, problems, overlap_window=overlap_window,
                                   job_curves=job_curves, found_calls=found_calls))
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


def _trace_dtype(collectives: list[dict[str, Any]]) -> str:
    by: dict[str, float] = {}
    for c in collectives:
        by[c.get("dtype") or "?"] = by.get(c.get("dtype") or "?", 0.0) + c["bytes"] * (c.get("calls_per_step") or 0)
    return "+".join(sorted(by, key=lambda d: -by[d])) or "-"


def _trace_bytes(comm: dict[str, Any]) -> int:
    total = comm.get("total_bytes_per_step")
    if isinstance(total, (int, float)):
        return int(total)
    return int(sum(c["bytes"] * (c.get("calls_per_step") or 0) for c in comm.get("collectives") or []))


def _strategy_rows(base: Observed, by_key: dict[tuple[Workload, str, str], Observed], curves: SweepCurves,
                   swept: list[str], problems: list[str], *, overlap_window: bool | None = None,
                   job_curves: SweepCurves | None = None,
                   found_calls: list[dict[str, Any]] | None = None) -> list[RelateRow]:
    """Every swept fabric's row for base's (workload, strategy), calibrated on base (the reference run)."""
    wl, strategy, ref = base.workload, base.strategy, base.fabric
    comm = base.comm
    if comm is None:
        problems.append(f"{strategy} ({wl.label()}) on the reference {ref}: the train record has no `comm` "
                        f"trace (recorded before fabricbench traced collectives); rerun `fabricbench train`")
        return []
    collectives = list(comm.get("collectives") or [])
    flags_all: list[str] = []
    timeline = comm.get("timeline") or None
    e = timeline.get("exposed_fraction") if isinstance(timeline, dict) else None
    if e is None:
        e = 1.0
        if collectives:
            flags_all.append(UPPER_BOUND)
            problems.append(f"{strategy} ({wl.label()}) on {ref}: the trace has no overlap timeline, so e = 1 "
                            f"(every second of communication exposed): predictions are upper bounds")
    e = min(1.0, max(0.0, float(e)))
    window = _window(base, e, overlap_window)
    gaps = Gaps.from_timeline(timeline, (comm.get("overhead") or {}).get("ratio"))
    if not collectives:
        flags_all.append(NO_COMMUNICATION)
        note = comm.get("note") or "no collective in the trace"
        problems.append(f"{strategy} ({wl.label()}): {note}; every fabric predicts the reference's step")
    raw_ref = price(collectives, curves, fabric=ref, nranks=wl.nranks)
    problems.extend(raw_ref.flags)
    ks, deltas, spread = _factors(base, raw_ref, job_curves, flags_all, problems, found_calls)
    on_ref = own_calls.shift(jobs.calibrate(raw_ref, ks), deltas, spread)
    first = as_dicts(comm.get("calls"))  # the reference's calls: which ran together (concurrency.py)
    shared_ref, _ = concurrency.saving(first, raw_ref, ks)
    if on_ref.time_s - shared_ref > base.step_s:
        problems.append(f"{strategy} ({wl.label()}) on the reference {ref}: its sweep prices {on_ref.time_s - shared_ref:.4g} s "
                        f"of communication per step, more than the observed {base.step_s:.4g} s step; the sweep "
                        f"and the training disagree (another dtype? busier machine?)")
    ref_bytes = _trace_bytes(comm)
    realised_ref = realised_fraction(curves.gapped, on_ref)
    rows = []
    for fab in swept:
        own = by_key.get((wl, strategy, fab))
        raw_fab = raw_ref if fab == ref else price(collectives, curves, fabric=fab, nranks=wl.nranks)
        on_fab = on_ref if fab == ref else own_calls.shift(jobs.calibrate(raw_fab, ks), deltas, spread)
        shared = (shared_ref, shared_ref if fab == ref else concurrency.saving(first, raw_fab, ks)[0])
        if fab != ref:
            problems.extend(on_fab.flags)
        elsewhere = _placement_note(base, curves, fab)
        if elsewhere:
            problems.append(elsewhere)
        if gaps is None and collectives and bucket_s(fab) is not None:
            problems.append(f"{strategy} ({wl.label()}) on {fab}: the reference's trace has no idle gaps "
                            f"(recorded before traces had them), so the link credit of {fab}'s token bucket is "
                            f"not priced: the prediction there is high by up to {bucket_s(fab) * 1e3:.2g} ms per "
                            f"collective; rerun `fabricbench train` on {ref}")
        if collectives and not any(r.time_s is not None and f.time_s is not None
                                   for r, f in zip(on_ref.entries, on_fab.entries)):
            problems.append(f"{strategy} ({wl.label()}) on {fab}: none of its traced collectives can be priced "
                            f"on both {fab} and the reference {ref}; no row")
            continue
        realised = (realised_ref, realised_ref if fab == ref else realised_fraction(curves.gapped, on_fab))
        rows.append(_row(base, own, fab, e, on_ref, on_fab, ref_bytes, _trace_dtype(collectives), flags_all,
                         window, gaps,
                         problems, shared, realised))
        if elsewhere:
            rows[-1].flags.append(PLACEMENT)
    rows.sort(key=lambda r: (r.fabric != ref, -(r.busbw_ratio or 0.0)))
    return rows


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


def _factors(base: Observed, raw_ref: Pricing, job_curves: SweepCurves | None, flags_all: list[str],
             problems: list[str], found_calls: list[dict[str, Any]] | None
             ) -> tuple[list[float | None], list[float | None], list[float]]:
    """(k per traced collective from a job's observed calls where it has them (job.py); δ per traced
    collective from the reference run's own calls where their ratio to the sweep is stable and no job
    calibrated it (calls.py); the spread of each δ in seconds, which widens the prices' intervals); flags
    and notes for both."""
    who = f"{base.strategy} ({base.workload.label()})"
    ks = jobs.factors(raw_ref, job_curves) if job_curves is not None else [None] * len(raw_ref.entries)
    if any(k is not None for k in ks):
        problems.append(jobs.note(who, ks, raw_ref.entries, base.fabric))
        flags_all.append(jobs.CALIBRATED)
    found, shared = own_calls.ratios(base.comms or ((base.comm,) if base.comm else ()), raw_ref)
    problems.extend(own_calls.note(who, base.fabric, found, shared))
    if found_calls is not None and found:
        found_calls.append({"strategy": base.strategy, "model": base.workload.model, "nranks": base.workload.nranks,
                            "reference": base.fabric, "shared_calls": shared,
                            "by_op": own_calls.by_op(found), "by_size": [c.to_dict() for c in found]})
    own = [None if k is not None else d for k, d in zip(ks, own_calls.offsets(raw_ref, found))]
    if any(d is not None for d in own):
        flags_all.append(own_calls.SELF_CALIBRATED)
    if any(c.disagrees for c in found):
        flags_all.append(own_calls.DISAGREE)
    spread = [0.0 if k is not None else w for k, w in zip(ks, own_calls.spreads(raw_ref, found))]
    return ks, own, spread


def _row(base: Observed, own: Observed | None, fab: str, e: float, on_ref: Pricing, on_fab: Pricing,
         ref_bytes: int, dtype: str, flags_all: list[str], found: overlap.Window | None, gaps: Gaps | None,
         problems: list[str], shared: tuple[float, float] = (0.0, 0.0),
         realised: tuple[Realised | None, Realised | None] = (None, None)) -> RelateRow:
    wl, ref = base.workload, base.fabric
    r = tuple(x.fraction if x is not None else None for x in realised)
    window = found.seconds if found is not None else None
    p = predict(ref_step_s=base.step_s, exposed_fraction=e, on_ref=on_ref, on_fabric=on_fab, window_s=window,
                gaps=gaps, shared=shared, realised=r)
    # W is an estimate (even compute over the stretch, window.py): the interval's slow side also takes no
    # more hidden than the reference hid
    windows = (window, None) if window is not None else (None,)
    windowed = window is not None and abs(p.predicted_step_s - predict(
        ref_step_s=base.step_s, exposed_fraction=e, on_ref=on_ref, on_fabric=on_fab, gaps=gaps, shared=shared,
        realised=r).predicted_step_s) > WINDOW_MATTERS * p.predicted_step_s
    # the gaps were profiled, slower than the timed steps: the credit as profiled, and all of each bucket
    # (not the fraction a call realised in the gapped sweep), bounds the other side
    wide = predict(ref_step_s=base.step_s, exposed_fraction=e, on_ref=on_ref, on_fabric=on_fab, window_s=window,
                   gaps=gaps, scaled=False, shared=shared)
    flags = list(flags_all) + list(p.flags)
    if fab == ref:
        flags.insert(0, REFERENCE)
    if windowed:
        flags.append(OVERLAP_WINDOW)
        problems.append(f"{base.strategy} ({wl.label()}) on the reference {ref}: {found.note()}")
    if own is None:
        flags.append(PREDICTED_ONLY)
    for entry in on_fab.entries + (on_ref.entries if fab != ref else ()):
        if entry.status not in ("exact", "interpolated") and entry.status not in flags:
            flags.append(entry.status)
        if entry.substituted and "dtype substituted" not in flags:
            flags.append("dtype substituted")
    own_e = None
    if own is not None and own.comm:
        tl = own.comm.get("timeline")
        own_e = tl.get("exposed_fraction") if isinstance(tl, dict) else None
        own_bytes = _trace_bytes(own.comm)
        if fab != ref and abs(own_bytes - ref_bytes) > 0.02 * max(ref_bytes, 1):
            flags.append("trace differs")
            problems.append(f"{base.strategy} ({wl.label()}): the trace on {fab} sends {own_bytes} B/step, "
                            f"on the reference {ref} {ref_bytes} B/step; the prediction uses the reference's")
    if p.credit_s > 0 or realised[1] is not None:
        flags.append(LINK_CREDIT)
        problems.append(f"{fab}: a token-bucket link (tc tbf) banks up to {bucket_s(fab) * 1e3:.2g} ms of its rate "
                        f"while idle; training spends it at each collective after compute, a sweep never does: "
                        f"T_comm is the swept price less that credit (flag: link credit; link_credit_s)")
    if realised[1] is not None:
        flags.append(CREDIT_MEASURED)
        problems.append(f"{base.strategy} ({wl.label()}) {realised[1].note(fab)}")
    if shared[1] > 0:
        flags.append(SHARED_LINK)
    if own is not None and own.runs > 1:
        flags.append(f"{own.runs} runs")
    obs = own.step_s if own is not None else None
    batch = base.global_batch
    ref_ci = base.step_ci95 or (base.step_s, base.step_s)
    rr, rf = on_ref.rel(), on_fab.rel()
    # C(f) is what the bucket can save at most (credit.py): the realised credit lies between none and C, so
    # the interval's slow side prices T_comm without it
    t_ref = (around(min(p.comm_time_ref_s, wide.comm_time_ref_s), rr)[0],
             around(p.comm_time_ref_s + p.credit_ref_s, rr)[1])
    t_fab = (around(min(p.comm_time_s, wide.comm_time_s), rf)[0], around(p.comm_time_s + p.credit_s, rf)[1])
    if fab == ref:
        pred_ci, slow_ci = ref_ci, (ref_ci[0] / ref_ci[1], ref_ci[1] / ref_ci[0])
    else:
        cis = [predict_interval(ref_ci=ref_ci, e=e, t_ref=t_ref, t_fab=t_fab, window_s=w) for w in windows]
        pred_ci = (min(c[0] for c in cis), max(c[1] for c in cis))
        slows = [step_formula(ref_step_s=a, e=e, t_ref=b, t_fab=c, window_s=w) / a
                 for a in ref_ci for b in t_ref for c in t_fab for w in windows]
        slow_ci = (min(slows), max(slows))
    obs_ci = ratio_ci(own.step_ci95, base.step_ci95) if own is not None and own.step_ci95 and base.step_ci95 \
        else None
    return RelateRow(
        strategy=base.strategy, fabric=fab, reference=ref, model=wl.model, precision=wl.precision,
        nranks=wl.nranks, dtype=dtype, observed_step_s=obs, predicted_step_s=p.predicted_step_s,
        observed_slowdown=obs / base.step_s if obs is not None else None,
        predicted_slowdown=p.predicted_step_s / base.step_s,
        residual=(p.predicted_step_s / obs - 1.0) if obs else None,
        busbw_ratio=p.busbw_ratio, busbw_gbps=p.busbw_gbps, comm_bytes_per_step=ref_bytes,
        comm_time_s=p.comm_time_s, comm_time_ref_s=p.comm_time_ref_s, compute_s=p.compute_s,
        exposed_fraction=e, exposed_fraction_observed=own_e,
        throughput=own.samples_per_s if own is not None else None,
        predicted_throughput=batch / p.predicted_step_s if batch and p.predicted_step_s > 0 else None,
        runs=own.runs if own is not None else 0, predicted_only=own is None, flags=flags,
        predicted_step_ci95=list(pred_ci), predicted_slowdown_ci95=list(slow_ci),
        observed_slowdown_ci95=list(obs_ci) if obs_ci else None, link_credit_s=p.credit_s, shared_link_s=p.shared_s)
