"""Predicted communication and step time per strategy on a GPU set of a given busbw.

    fabricbench advise --model dinov2-base --num-gpus 4 --results run/results.jsonl

Volume per step (S bytes per collective): the trace of a train record of this model, where results hold
one that ran on several ranks ("trace"); else the textbook volume, `Strategy.textbook_sends` × Ψ × b
(b = 2 bytes, bf16; docs/domain.md: DDP and ZeRO-1/2 2(n−1)/n·Ψ·b per rank, ZeRO-3/FSDP 3(n−1)/n·Ψ·b),
labelled "comm-volume arithmetic". Wire bytes per rank = Σ S × the op's busbw factor for n ranks;
T_comm = wire bytes / busbw (busbw as nccl-tests defines it: time = S × factor / busbw).

Step time: measured, where results hold a train run of exactly this job (model, strategy, GPU set, fabric,
batch); else, where the results hold relate's calibration for the strategy (a study with a trace and
sweeps), T_step = T_compute + e × T_comm (fabricbench/relating/model.py), T_compute and e from the
reference run, T_comm on this set as above. Without either no step time is claimed: strategies are
ranked by T_comm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.collectives import COLLECTIVES
from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_TRAIN
from fabricbench.training import repeats
from fabricbench.training.strategies import STRATEGIES

# S per step in units of Ψ·b when the strategy table does not say (docs/domain.md, textbook)
TEXTBOOK_SENDS: dict[str, dict[str, float]] = {
    "ddp": {"all_reduce": 1.0},
    "zero1": {"reduce_scatter": 1.0, "all_gather": 1.0},
    "zero2": {"reduce_scatter": 1.0, "all_gather": 1.0},
    "zero3": {"all_gather": 2.0, "reduce_scatter": 1.0},
    "fsdp": {"all_gather": 2.0, "reduce_scatter": 1.0},
}
BYTES_PER_ELEMENT = 2  # bf16


@dataclass(kw_only=True)
class StrategyTime:
    strategy: str
    gpus: list[int]
    comm_bytes_per_step: int  # S summed over the step's collectives
    wire_bytes_per_rank: float  # S × busbw factor, summed
    comm_time_s: float | None
    step_time_s: float | None  # None when no calibration exists
    volume_source: str  # "trace (N ranks)" or "comm-volume arithmetic (textbook)"
    time_source: str  # "relate model" or "comm time only"
    step_ci95: tuple[float, float] | None = None  # measured: the runs' 95% interval (training/repeats.py)
    host_bound: str | None = None  # measured: the host-bound note when the GPU was busy under half the step
    runs: tuple[TrainResult, ...] = ()  # measured: the runs behind step_time_s (advise compares them in pairs)

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "gpus": self.gpus, "comm_bytes_per_step": self.comm_bytes_per_step,
                "wire_bytes_per_rank": self.wire_bytes_per_rank, "comm_time_s": self.comm_time_s,
                "step_time_s": self.step_time_s, "volume_source": self.volume_source,
                "time_source": self.time_source, "step_ci95": list(self.step_ci95) if self.step_ci95 else None,
                "host_bound": self.host_bound}


def textbook_sends(strategy: str) -> dict[str, float]:
    sends = getattr(STRATEGIES.get(strategy), "textbook_sends", None)
    return dict(sends) if sends else TEXTBOOK_SENDS[strategy]


def traced(trains: list[TrainResult], *, model: str, strategy: str) -> dict[str, Any] | None:
    """The comm section of the latest train run of this model and strategy that traced collectives."""
    found = None
    for r in trains:
        comm = r.reached("comm") or {}
        if r.model == model and r.strategy == strategy and comm.get("collectives") and (comm.get("world_size") or 0) >= 2:
            found = comm
    return found


def _factor(op: str, n: int) -> float:
    return COLLECTIVES.get(op).busbw_factor(n) if op in COLLECTIVES else 0.0


def volume(*, strategy: str, psi: int, n: int, trains: list[TrainResult], model: str) -> tuple[int, float, str]:
    """(S bytes per step, wire bytes per rank, source)."""
    comm = traced(trains, model=model, strategy=strategy)
    if comm is not None:
        s = wire = 0.0
        for c in comm["collectives"]:
            size = float(c["bytes"]) * float(c.get("calls_per_step", 1.0))
            s += size
            wire += size * _factor(c["op"], n)
        return int(s), wire, f"trace ({comm['world_size']} ranks)"
    sends = textbook_sends(strategy)
    s_by_op = {op: k * psi * BYTES_PER_ELEMENT for op, k in sends.items()}
    return (int(sum(s_by_op.values())), sum(v * _factor(op, n) for op, v in s_by_op.items()),
            "comm-volume arithmetic (textbook, bf16)")


def calibration(relate_rows: list[Any], strategy: str) -> tuple[float, float] | None:
    """(T_compute s, e) of the strategy's reference row in relate's result, when it has one."""
    for row in relate_rows or []:
        get = row.get if isinstance(row, dict) else (lambda k, r=row: getattr(r, k, None))
        if get("strategy") == strategy and get("fabric") == get("reference") and get("compute_s") is not None:
            return float(get("compute_s")), float(get("exposed_fraction") or 1.0)
    return None


def measured(trains: list[TrainResult], *, model: str, strategy: str, gpus: list[int], fabric: str,
             batch_size: int | None) -> repeats.Figure | None:
    """The train runs of exactly this job (model, strategy, GPU set (any one GPU when n = 1: they are
    alike), fabric and per-GPU batch) as one figure: the median over runs with its 95% interval and any
    host-bound note (training/repeats.py). Measured beats any prediction."""
    runs = measured_runs(trains, model=model, strategy=strategy, gpus=gpus, fabric=fabric, batch_size=batch_size)
    figs = repeats.figures(runs)
    return figs[0] if figs else None


def measured_runs(trains: list[TrainResult], *, model: str, strategy: str, gpus: list[int], fabric: str,
                  batch_size: int | None) -> tuple[TrainResult, ...]:
    """The runs `measured` takes (so that two candidates can be compared round by round)."""
    return tuple(r for r in trains
                 if (r.model == model and r.strategy == strategy and r.status in TIMED_TRAIN and r.fabric == fabric
                     and r.device == "cuda" and (batch_size is None or r.batch_size == batch_size)
                     and (sorted(r.gpus or []) == sorted(gpus) or (len(gpus) == 1 and r.nranks == 1))))


def predict(*, strategies: list[str], gpus: list[int], busbw_gbps: float | None, psi: int, n: int,
            trains: list[TrainResult], model: str, relate_rows: list[Any] | None = None,
            fabric: str = "default", batch_size: int | None = None) -> list[StrategyTime]:
    out = []
    for s in strategies:
        total, wire, vsrc = volume(strategy=s, psi=psi, n=n, trains=trains, model=model)
        if n < 2:
            comm = 0.0
        else:
            comm = wire / (busbw_gbps * 1e9) if busbw_gbps else None
        fig = measured(trains, model=model, strategy=s, gpus=list(gpus), fabric=fabric, batch_size=batch_size)
        cal = calibration(relate_rows or [], s)
        if fig is not None:
            step, tsrc = fig.step_s, "measured"
        elif cal is not None and comm is not None:
            step, tsrc = cal[0] + cal[1] * comm, "relate model"
        else:
            step, tsrc = None, "comm time only"
        out.append(StrategyTime(strategy=s, gpus=list(gpus), comm_bytes_per_step=total, wire_bytes_per_rank=wire,
                                comm_time_s=comm, step_time_s=step, volume_source=vsrc, time_source=tsrc,
                                step_ci95=fig.step_ci95 if fig else None, host_bound=fig.host_bound if fig else None,
                                runs=measured_runs(trains, model=model, strategy=s, gpus=list(gpus), fabric=fabric,
                                                   batch_size=batch_size) if fig else ()))
    return out
