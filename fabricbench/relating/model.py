"""The step-time model calibrated on one fabric: the reference run's step, its traced communication priced
on every fabric's sweep (pricing.py), less a token-bucket link's credit (credit.py).

    fabricbench relate sweeps.jsonl train.jsonl --reference default

Step time, calibrated on the reference fabric r alone (e = the exposed fraction of communication):

    T_compute  = T_step(r) − e × T_comm(r)
    H(f)       = min((1 − e) × T_comm(f),  max(W, (1 − e) × T_comm(r)))   hidden communication
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

W, the reference's overlap window (window.py), lifts that cap where communication has resources of its own
(NCCL kernels, or gloo with two cores a rank): the compute after the step's first collective that carries
bytes, which a slower fabric's longer calls run beside (at 6 Gbit/s the one-GPU lab's DDP stepped 2-4.5 ms
faster than a prediction that hid only the ~1 ms its reference hid). Where gloo shares the cores with compute
(the CPU lab above) there is no W: a longer call there slows the compute it runs beside.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricbench.relating.credit import Gaps, link_credit
from fabricbench.relating.pricing import Pricing

FORMULA = ("T_step(f) = max(T_compute + T_comm(f) - H(f), T_comm(f)), T_compute = T_step(ref) - e*T_comm(ref), "
           "H(f) = min((1-e)*T_comm(f), max(W, (1-e)*T_comm(ref))) (hidden communication; W = the reference's overlap "
           "window where communication has resources of its own, else 0: window.py), "
           "T_comm(f) = sum over traced collectives of calls * (k * t_f(op, S) + d) (swept time, log-log "
           "interpolation) "
           "- C(f) - O(f), O(f) = what the reference's overlapped stretches save with the link shared (a stretch "
           "priced as its wire bytes at the fabric's bandwidth for that volume, concurrency.py), "
           "k = a job's observed calls' time over the sweep's on the reference (job.py), d = the run's own "
           "calls' time less the sweep's on the reference where stable (calls.py), "
           "C(f) = link credit of a token-bucket fabric per step: sum over the reference's idle gaps g "
           "of min(burst/rate, g, one stretch's T_comm) / steps, times r(f), the fraction of a bucket a call "
           "realised in the fabric's sweep with --gap (1 where none; 0 on fabrics without a bucket), "
           "e = exposed fraction from the reference run's overlap timeline (1 where it has none: an upper bound)")
COMM_BOUND = "communication-bound"  # the floor T_step >= T_comm set the prediction


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
    shared_s: float = 0.0  # O(f): what collectives in flight together save by sharing the link (concurrency.py)


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


def predict(*, ref_step_s: float, exposed_fraction: float, on_ref: Pricing, on_fabric: Pricing,
            window_s: float | None = None, gaps: Gaps | None = None, scaled: bool = True,
            shared: tuple[float, float] = (0.0, 0.0),
            realised: tuple[float | None, float | None] = (None, None)) -> Prediction:
    """T_step(f) = max(T_compute + T_comm(f) − H(f), T_comm(f)) as the module docstring says, over the
    collectives priced on both fabrics, each T_comm less its fabric's link credit (from `gaps`) and less what
    its overlapped stretches save by sharing the link (`shared`: O on the reference, on the fabric), and
    the credit the fraction of a bucket a call was measured to realise (`realised`, credit.realised_fraction:
    on the reference, on the fabric; None: all of it)."""
    assert 0.0 <= exposed_fraction <= 1.0 and ref_step_s > 0
    assert len(on_ref.entries) == len(on_fabric.entries), "both pricings must be of the same trace"
    common = [(r, f) for r, f in zip(on_ref.entries, on_fabric.entries)
              if r.time_s is not None and f.time_s is not None]
    swept_ref = sum(r.step_time_s for r, _ in common)
    swept_fab = sum(f.step_time_s for _, f in common)
    c_ref = link_credit(gaps, on_ref, [r for r, _ in common], swept_ref, scaled, realised[0])
    c_fab = link_credit(gaps, on_fabric, [f for _, f in common], swept_fab, scaled, realised[1])
    t_ref, t_fab = swept_ref - c_ref - shared[0], swept_fab - c_fab - shared[1]
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
                      busbw_gbps=eff_fab, flags=tuple(flags), credit_s=c_fab, credit_ref_s=c_ref, shared_s=shared[1])
