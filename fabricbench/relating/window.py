"""The overlap window W: how much compute a slower fabric's communication can hide behind (model.hidden).

A step hides communication only where a collective runs beside compute. The reference's trace shows how
much it hid, (1 - e) x T_comm(ref). On a slower fabric each call lasts longer, and a call issued while
compute still has a stretch to run (DDP's first gradient bucket, issued mid-backward) hides more of itself,
up to that stretch; the last call (issued when backward ends) has nothing left to hide behind. W is that
stretch in the reference's trace: the compute between the start of the first collective that carries the
step's bytes (at least BIG of them: DDP's 64-byte broadcast at forward's start grows with no fabric) and
the last collective's start, in timed-step seconds:

    W = (last start - first big start) x window / (last start - first start) / overhead

window (comm.timeline.window_s) is the compute between the first and the last collective's start of the
profiled steps; the calls' rows (comm.calls, rank 0, each profiled step) give the starts, and the share
assumes the compute is spread evenly over that stretch (a host-bound step launches kernels throughout);
overhead (comm.overhead.ratio, profiled step / timed step, at least 1) brings it to the timed steps.

It applies only where communication has resources of its own (`applies`): NCCL kernels on GPU, or gloo's
worker threads on a host with at least two cores per rank (the step's thread and its gloo worker, each on
one). Where gloo shares the cores with compute, a longer collective beside compute slows that compute as
much as it hides, and the reference rule (hide no more than the reference hid) stands: on the 2-core CPU lab
(2 ranks) W put DDP at -9.3% and -15.3% (cpu-lab/relate-lab-rerun) where the reference rule put it at
-1.7% and -12.5%. On the one-GPU lab (16 cores, 3 ranks) the reference rule over-predicted DDP at the
fabrics faster than 2 Gbit/s on every run (6 Gbit/s: +8.5 to +19%, 2-4.5 ms above the observed step, where
the reference hid ~1 ms); W, 2.7-3.8 ms there, brings DDP to -5..+9% at every rate of every run but one
point of the noisy r9 (4gbit: -12.9% -> -20.4%) (benchmarks/relate/README.md).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from fabricbench.training.calltimes import as_dicts
from fabricbench.training.timeline import NCCL_SOURCE

BIG = 0.01  # a collective carrying at least this share of the step's bytes grows with the fabric
CORES_PER_RANK = 2  # the step's thread and its gloo worker, each on a core of its own


@dataclass(frozen=True)
class Window:
    """W in timed-step seconds and how it was reached (relate's note)."""

    seconds: float
    profiled_stretch_s: float  # wall time from the first big collective's start to the last one's (median step)
    compute_share: float  # window / (last start - first start): compute's share of that stretch
    overhead: float

    def note(self) -> str:
        return (f"compute after its first collective that carries bytes, {self.seconds * 1e3:.3g} ms a timed step "
                f"({self.profiled_stretch_s * 1e3:.3g} ms of a profiled step, {self.compute_share:.0%} of it "
                f"compute, over {self.overhead:.3g}x profiling overhead): a slower fabric's communication hides "
                f"up to that (overlap window)")


def applies(comm: dict[str, Any], cores_per_rank: float | None) -> bool:
    """Whether a longer collective can run beside compute without slowing it: NCCL on GPU, or gloo with
    CORES_PER_RANK cores a rank on its host (unknown cores: no)."""
    source = str(((comm.get("timeline") or {}).get("source")) or "")
    if source == NCCL_SOURCE:
        return True
    return cores_per_rank is not None and cores_per_rank >= CORES_PER_RANK


def overlap_window(comm: dict[str, Any]) -> Window | None:
    """W of the reference's trace (module docstring); None where the trace has no window or no calls'
    rows (recorded before they were), or no collective carries the step's bytes."""
    timeline = comm.get("timeline") or {}
    window = timeline.get("window_s")
    rows = as_dicts(comm.get("calls"))
    if not isinstance(window, (int, float)) or not rows:
        return None
    by_step: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_step.setdefault(r.get("step"), []).append(r)
    stretches, windows, shares = [], [], []
    for step_calls in by_step.values():
        total = sum(int(r.get("bytes") or 0) for r in step_calls)
        starts = [float(r["start_s"]) for r in step_calls]
        big = [float(r["start_s"]) for r in step_calls if total and int(r.get("bytes") or 0) >= BIG * total]
        full = max(starts) - min(starts)
        if not big or full <= 0:
            continue
        share = min(1.0, float(window) / full)  # compute's share of the stretch between first and last start
        stretches.append(max(starts) - min(big))
        shares.append(share)
        windows.append(stretches[-1] * share)
    if not windows:
        return None
    overhead = max(1.0, float((comm.get("overhead") or {}).get("ratio") or 1.0))
    return Window(seconds=statistics.median(windows) / overhead, profiled_stretch_s=statistics.median(stretches),
                  compute_share=statistics.median(shares), overhead=overhead)
