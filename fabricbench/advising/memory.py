"""Which strategies fit the GPU's memory, with the headroom: the estimator, or a measured peak where known.

    fabricbench advise --model mistral-7b --num-gpus 4 --gpu-memory 80G

need = model states per GPU (fabricbench/training/estimate.py, the framework recipe) + activations
(34·s·b·h·L, same file), or the peak reserved memory of a train record of this model, strategy and
GPU count (measured beats estimated; an "oom" record is a measured no). The headroom is capacity − need.
Verdicts: "fits" when the headroom keeps RESERVE_FRACTION of the GPU free for what no estimate counts
(CUDA context, NCCL and bucket buffers, fragmentation), "tight" when it fits without that reserve,
"does not fit" otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_TRAIN, Status
from fabricbench.training.estimate import model_states

RESERVE_FRACTION = 0.10

# total memory by GPU name (vendors' data sheets), for topologies that name the GPU but not its memory
MEMORY_BY_NAME: tuple[tuple[str, int], ...] = (
    ("H200", 141 * 10**9), ("H100 NVL", 94 * 10**9), ("H100", 80 * 10**9), ("A100-SXM4-40GB", 40 * 10**9),
    ("A100", 80 * 10**9), ("L40S", 48 * 10**9), ("A10G", 24 * 10**9),
)


@dataclass(kw_only=True)
class MemoryFit:
    strategy: str
    need_bytes: int
    states_bytes: int
    activation_bytes: int
    capacity_bytes: int | None
    headroom_bytes: int | None  # capacity − need (negative: it does not fit)
    verdict: str  # "fits", "tight", "does not fit", "unknown" (no capacity)
    source: str  # "estimate (framework recipe)" or "measured peak reserved" / "measured: out of memory"

    @property
    def usable(self) -> bool:
        return self.verdict in ("fits", "tight", "unknown")

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "need_bytes": self.need_bytes, "states_bytes": self.states_bytes,
                "activation_bytes": self.activation_bytes, "capacity_bytes": self.capacity_bytes,
                "headroom_bytes": self.headroom_bytes, "verdict": self.verdict, "source": self.source}


def capacity_from_name(name: str | None) -> int | None:
    if not name:
        return None
    for key, value in MEMORY_BY_NAME:
        if key in name:
            return value
    return None


def _measured(trains: Sequence[TrainResult], *, model: str, strategy: str, n: int,
              batch_size: int | None) -> TrainResult | None:
    """The latest GPU train run of this model, strategy, GPU count and per-GPU batch."""
    found = None
    for r in trains:
        if (r.model == model and r.strategy == strategy and r.nranks == n and r.device == "cuda"
                and r.status in (*TIMED_TRAIN, Status.OOM) and (batch_size is None or r.batch_size == batch_size)):
            found = r
    return found


def fits(*, strategies: list[str], psi: int, n: int, activation_bytes: int, capacity: int | None, model: str,
         trains: Sequence[TrainResult] = (), recipe: str = "framework",
         batch_size: int | None = None) -> list[MemoryFit]:
    """Each strategy's need against `capacity`; `trains` (typed train records) give measured needs."""
    states = model_states(psi=psi, num_gpus=n, recipe=recipe)
    out = []
    for s in strategies:
        st = states[s]["total_bytes"]
        need, source = st + activation_bytes, f"estimate ({recipe} recipe)"
        rec = _measured(trains, model=model, strategy=s, n=n, batch_size=batch_size)
        if rec is not None and rec.status == Status.OOM:
            out.append(MemoryFit(strategy=s, need_bytes=need, states_bytes=st, activation_bytes=activation_bytes,
                                 capacity_bytes=capacity, headroom_bytes=None, verdict="does not fit",
                                 source="measured: out of memory"))
            continue
        peak = ((rec.reached("memory") if rec else None) or {}).get("max_reserved_bytes")
        if peak is not None and peak > 0:
            need, source = peak, "measured peak reserved"
        if capacity is None:
            verdict, headroom = "unknown", None
        else:
            headroom = capacity - need
            verdict = "fits" if headroom >= RESERVE_FRACTION * capacity else ("tight" if headroom >= 0 else "does not fit")
        out.append(MemoryFit(strategy=s, need_bytes=need, states_bytes=st, activation_bytes=activation_bytes,
                             capacity_bytes=capacity, headroom_bytes=headroom, verdict=verdict, source=source))
    return out
