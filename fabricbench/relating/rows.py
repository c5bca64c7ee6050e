"""One row of `fabricbench relate`: one strategy on one fabric, predicted from the reference run's calibration.

    fabricbench relate sweeps.jsonl train.jsonl

    row, notes = rows.build(calibration, rows.OnFabric(fabric="shaped:1gbit", own=None, priced=...))

Pure: a row's flags and the sentences it adds to the result's problems are built here and returned; nothing
the caller holds is changed. What every fabric's row of one (workload, strategy) shares is one frozen
Calibration (api.py makes it from the reference run), what differs per fabric one OnFabric.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fabricbench.statistics.figures import around, ratio_ci
from fabricbench.relating import window as overlap
from fabricbench.relating.credit import Gaps, Realised, bucket_s
from fabricbench.relating.inputs import Observed
from fabricbench.relating.model import Prediction, predict, predict_interval, step_formula
from fabricbench.relating.pricing import Pricing

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
TRACE_DIFFERS = 0.02  # a fabric's own trace sends more or less than the reference's by this share: flagged


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


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What every fabric's row of one (workload, strategy) shares: the reference run and its trace as priced
    on the reference's sweep."""

    base: Observed  # the reference run
    exposed_fraction: float  # e, from its overlap timeline (1 where it has none)
    on_ref: Pricing  # its trace priced on the reference's sweep, calibrated (job.py, calls.py)
    ref_bytes: int  # its trace's bytes per step
    dtype: str  # its trace's dtypes, most bytes first
    flags: tuple[str, ...]  # the flags every row of it carries
    window: overlap.Window | None  # the overlap window a slower fabric may hide up to (window.py)
    gaps: Gaps | None  # its idle gaps, where a token-bucket link banks credit (credit.py)
    shared_s: float = 0.0  # O(ref) (concurrency.py)
    realised: Realised | None = None  # the credit its sweep --gap realised on the reference (credit.py)


@dataclass(frozen=True, kw_only=True)
class OnFabric:
    """One fabric's side of a row: the reference's trace priced on its sweep, and its own runs if any."""

    fabric: str
    own: Observed | None  # the run(s) on this fabric; None: predicted-only
    priced: Pricing  # the reference's trace on this fabric's sweep, calibrated as on the reference
    shared_s: float = 0.0  # O(f)
    realised: Realised | None = None
    placement_differs: bool = False  # its sweep placed the ranks elsewhere than the training (curves.py)


def trace_dtype(collectives: list[dict[str, Any]]) -> str:
    by: dict[str, float] = {}
    for c in collectives:
        by[c.get("dtype") or "?"] = by.get(c.get("dtype") or "?", 0.0) + c["bytes"] * (c.get("calls_per_step") or 0)
    return "+".join(sorted(by, key=lambda d: -by[d])) or "-"


def trace_bytes(comm: dict[str, Any]) -> int:
    total = comm.get("total_bytes_per_step")
    if isinstance(total, (int, float)):
        return int(total)
    return int(sum(c["bytes"] * (c.get("calls_per_step") or 0) for c in comm.get("collectives") or []))


def build(cal: Calibration, fab: OnFabric) -> tuple[RelateRow, list[str]]:
    """The row of `fab`, and the sentences it adds to the problems (in the order they arose)."""
    base, ref = cal.base, cal.base.fabric
    own = fab.own
    p, wide, windowed = _predictions(cal, fab)
    flags, notes = _flags(cal, fab, p, windowed)
    pred_ci, slow_ci = _intervals(cal, fab, p, wide)
    obs = own.step_s if own is not None else None
    obs_ci = ratio_ci(own.step_ci95, base.step_ci95) if own is not None and own.step_ci95 and base.step_ci95 \
        else None
    batch = base.global_batch
    wl = base.workload
    row = RelateRow(
        strategy=base.strategy, fabric=fab.fabric, reference=ref, model=wl.model, precision=wl.precision,
        nranks=wl.nranks, dtype=cal.dtype, observed_step_s=obs, predicted_step_s=p.predicted_step_s,
        observed_slowdown=obs / base.step_s if obs is not None else None,
        predicted_slowdown=p.predicted_step_s / base.step_s,
        residual=(p.predicted_step_s / obs - 1.0) if obs else None,
        busbw_ratio=p.busbw_ratio, busbw_gbps=p.busbw_gbps, comm_bytes_per_step=cal.ref_bytes,
        comm_time_s=p.comm_time_s, comm_time_ref_s=p.comm_time_ref_s, compute_s=p.compute_s,
        exposed_fraction=cal.exposed_fraction, exposed_fraction_observed=_own_exposed(own),
        throughput=own.samples_per_s if own is not None else None,
        predicted_throughput=batch / p.predicted_step_s if batch and p.predicted_step_s > 0 else None,
        runs=own.runs if own is not None else 0, predicted_only=own is None, flags=flags,
        predicted_step_ci95=list(pred_ci), predicted_slowdown_ci95=list(slow_ci),
        observed_slowdown_ci95=list(obs_ci) if obs_ci else None, link_credit_s=p.credit_s, shared_link_s=p.shared_s)
    return row, notes


def _predict(cal: Calibration, fab: OnFabric, *, window: bool = True, measured_credit: bool = True) -> Prediction:
    """model.predict for this row. window: with the reference's overlap window (else no more hidden than the
    reference hid); measured_credit: the link credit scaled as the gaps were timed and to the fraction of a
    bucket a call realised in the gapped sweep (else all of each bucket, as profiled)."""
    kw: dict[str, Any] = {"realised": (_fraction(cal.realised), _fraction(fab.realised))} if measured_credit \
        else {"scaled": False}
    if window and cal.window is not None:
        kw["window_s"] = cal.window.seconds
    return predict(ref_step_s=cal.base.step_s, exposed_fraction=cal.exposed_fraction, on_ref=cal.on_ref,
                   on_fabric=fab.priced, gaps=cal.gaps, shared=(cal.shared_s, fab.shared_s), **kw)


def _fraction(r: Realised | None) -> float | None:
    return r.fraction if r is not None else None


def _predictions(cal: Calibration, fab: OnFabric) -> tuple[Prediction, Prediction, bool]:
    """(the prediction; its bound with every bucket's whole credit; whether the overlap window moved it by
    more than WINDOW_MATTERS)."""
    p = _predict(cal, fab)
    # W is an estimate (even compute over the stretch, window.py): the interval's slow side also takes no
    # more hidden than the reference hid
    windowed = cal.window is not None and abs(p.predicted_step_s - _predict(cal, fab, window=False).predicted_step_s) \
        > WINDOW_MATTERS * p.predicted_step_s
    # the gaps were profiled, slower than the timed steps: the credit as profiled, and all of each bucket
    # (not the fraction a call realised in the gapped sweep), bounds the other side
    wide = _predict(cal, fab, measured_credit=False)
    return p, wide, windowed


def _own_exposed(own: Observed | None) -> float | None:
    """e of the fabric's own run's timeline, where it has one."""
    if own is None or not own.comm:
        return None
    tl = own.comm.get("timeline")
    return tl.get("exposed_fraction") if isinstance(tl, dict) else None


def _flags(cal: Calibration, fab: OnFabric, p: Prediction, windowed: bool) -> tuple[list[str], list[str]]:
    """The row's flags, and the sentences that explain those that need one."""
    base, ref, f, own = cal.base, cal.base.fabric, fab.fabric, fab.own
    who = f"{base.strategy} ({base.workload.label()})"
    flags, notes = list(cal.flags) + list(p.flags), []
    if f == ref:
        flags.insert(0, REFERENCE)
    if windowed:
        assert cal.window is not None
        flags.append(OVERLAP_WINDOW)
        notes.append(f"{who} on the reference {ref}: {cal.window.note()}")
    if own is None:
        flags.append(PREDICTED_ONLY)
    for entry in fab.priced.entries + (cal.on_ref.entries if f != ref else ()):
        if entry.status not in ("exact", "interpolated") and entry.status not in flags:
            flags.append(entry.status)
        if entry.substituted and "dtype substituted" not in flags:
            flags.append("dtype substituted")
    if own is not None and own.comm:
        own_bytes = trace_bytes(own.comm)
        if f != ref and abs(own_bytes - cal.ref_bytes) > TRACE_DIFFERS * max(cal.ref_bytes, 1):
            flags.append("trace differs")
            notes.append(f"{who}: the trace on {f} sends {own_bytes} B/step, on the reference {ref} "
                         f"{cal.ref_bytes} B/step; the prediction uses the reference's")
    if p.credit_s > 0 or fab.realised is not None:
        flags.append(LINK_CREDIT)
        notes.append(f"{f}: a token-bucket link (tc tbf) banks up to {bucket_s(f) * 1e3:.2g} ms of its rate "
                     f"while idle; training spends it at each collective after compute, a sweep never does: "
                     f"T_comm is the swept price less that credit (flag: link credit; link_credit_s)")
    if fab.realised is not None:
        flags.append(CREDIT_MEASURED)
        notes.append(f"{who} {fab.realised.note(f)}")
    if fab.shared_s > 0:
        flags.append(SHARED_LINK)
    if own is not None and own.runs > 1:
        flags.append(f"{own.runs} runs")
    if fab.placement_differs:
        flags.append(PLACEMENT)
    return flags, notes


def _intervals(cal: Calibration, fab: OnFabric, p: Prediction, wide: Prediction
               ) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% intervals of the predicted step and slowdown, from the reference run's step interval and both
    fabrics' price intervals (model.predict_interval)."""
    base, e = cal.base, cal.exposed_fraction
    ref_ci = base.step_ci95 or (base.step_s, base.step_s)
    if fab.fabric == base.fabric:
        return ref_ci, (ref_ci[0] / ref_ci[1], ref_ci[1] / ref_ci[0])
    rr, rf = cal.on_ref.rel(), fab.priced.rel()
    # C(f) is what the bucket can save at most (credit.py): the realised credit lies between none and C, so
    # the interval's slow side prices T_comm without it
    t_ref = (around(min(p.comm_time_ref_s, wide.comm_time_ref_s), rr)[0],
             around(p.comm_time_ref_s + p.credit_ref_s, rr)[1])
    t_fab = (around(min(p.comm_time_s, wide.comm_time_s), rf)[0], around(p.comm_time_s + p.credit_s, rf)[1])
    window = cal.window.seconds if cal.window is not None else None
    windows = (window, None) if window is not None else (None,)
    cis = [predict_interval(ref_ci=ref_ci, e=e, t_ref=t_ref, t_fab=t_fab, window_s=w) for w in windows]
    slows = [step_formula(ref_step_s=a, e=e, t_ref=b, t_fab=c, window_s=w) / a
             for a in ref_ci for b in t_ref for c in t_fab for w in windows]
    return (min(c[0] for c in cis), max(c[1] for c in cis)), (min(slows), max(slows))
