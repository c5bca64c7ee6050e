"""Reading what relate joins: collective records (sweep, compare, scaling) and train records.

    fabricbench relate sweeps.jsonl train.jsonl

Train runs of the same workload (model, ranks, precision, batch, sequence or image size, device),
strategy and fabric are one observation: repeats combine by the median of their median step times.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fabricbench import hostload
from fabricbench.errors import UsageError
from fabricbench.statistics.figures import around
from fabricbench.relating.curves import placement
from fabricbench.results import records as results_records
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import TIMED_TRAIN
from fabricbench.training import repeats

USABLE_TRAIN = tuple(TIMED_TRAIN)  # "flagged": the loss did not fall, but the step was timed all the same


@dataclass(kw_only=True)
class Inputs:
    """What relate joins, typed (results/records.py): the collective records and the train records."""

    collectives: list[CollectiveResult]
    trains: list[TrainResult]


def load(records_or_paths: Any, problems: list[str] | None = None) -> Inputs:
    """The collective and train records of paths (JSONL written by fabricbench), dicts, or objects with
    to_dict(), in order, typed.

    Every record is checked as results/records.py checks a file's (types per kind); one that fails is
    left out with a sentence in `problems`. A file with no readable record at all is a UsageError.
    """
    if isinstance(records_or_paths, (str, os.PathLike, dict)) or hasattr(records_or_paths, "to_dict"):
        records_or_paths = [records_or_paths]
    problems = [] if problems is None else problems
    got = results_records.Records(path="relate inputs")
    for item in records_or_paths:
        if hasattr(item, "to_dict") and not isinstance(item, dict):
            item = item.to_dict()
        if isinstance(item, dict):
            why = results_records.check_record(item)
            if why:
                problems.append(f"record {str(item.get('kind'))[:40]}: {why}; left out")
            else:
                got.records.append(item)
        elif isinstance(item, (str, os.PathLike)):
            read = results_records.read_nonempty(Path(item), what="input")
            problems.extend(read.warnings)
            got.records.extend(read.records)
        else:
            raise UsageError(f"relate takes paths, record dicts or results, not {type(item).__name__}")
    return Inputs(collectives=got.typed(CollectiveResult), trains=got.typed(TrainResult))


def precision_of(run: TrainResult) -> str:
    return str(run.reached("precision") or run.reached("mixed_precision") or "?")


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What must be equal for two train runs to differ only by fabric and strategy."""

    model: str
    nranks: int
    precision: str
    batch_size: int | None
    seq_len: int | None
    image_size: int | None
    device: str | None

    @classmethod
    def of(cls, run: TrainResult) -> "Workload":
        return cls(model=str(run.model), nranks=int(run.nranks or run.reached("world_size") or 0),
                   precision=precision_of(run), batch_size=run.batch_size, seq_len=run.seq_len,
                   image_size=run.image_size, device=run.device)

    def label(self) -> str:
        return f"{self.model}, {self.nranks} ranks, {self.precision}" + \
            (f", batch {self.batch_size}" if self.batch_size is not None else "")


@dataclass(frozen=True, kw_only=True)
class Observed:
    """One (workload, strategy, fabric): the runs' median step time, throughput and first trace."""

    workload: Workload
    strategy: str
    fabric: str
    step_s: float
    samples_per_s: float | None
    global_batch: int | None
    comm: dict[str, Any] | None
    runs: int
    step_ci95: tuple[float, float] | None = None  # run-to-run (or one run's own) 95% interval of step_s
    comms: tuple[dict[str, Any], ...] = ()  # every run's trace (comm is the first): the calls' repeats (calls.py)
    placement: str | None = None  # where the ranks ran (curves.placement): a sweep elsewhere prices another
    cores_per_rank: float | None = None  # the host's cores over its ranks (window.applies); None: unknown


def observations(trains: Iterable[TrainResult]) -> tuple[list[Observed], list[str]]:
    """Usable train runs combined per (workload, strategy, fabric); problems for the rest."""
    groups: dict[tuple[Workload, str, str], list[TrainResult]] = {}
    problems: list[str] = []
    for run in trains:
        step = run.median_step_s
        if run.status not in USABLE_TRAIN or not step or step <= 0:
            why = run.message or "no timed step"
            problems.append(f"train record {run.strategy} on fabric {run.fabric}: status {run.status.value} "
                            f"({why}); left out")
            continue
        groups.setdefault((Workload.of(run), run.strategy, run.fabric), []).append(run)
    out = []
    for (wl, strategy, fabric), runs in groups.items():
        sps = [v for r in runs if (v := r.samples_per_s)]
        comms = tuple(c for r in runs if isinstance(c := r.reached("comm"), dict))
        comm = next((c for r in runs if (c := r.reached("comm")) is not None), None)
        fig = repeats.figures(runs)[0]  # the one statistics rule (statistics/figures.py via repeats.py)
        if (apart := _runs_apart(runs)) is not None:
            problems.append(f"{strategy} ({wl.label()}) on {fabric}: its {len(runs)} runs disagree beyond their "
                            f"own intervals ({apart}): its step is their median, its interval run to run (fresh "
                            f"processes vary beyond one run's interval on a quiet machine too, and far beyond it "
                            f"on one that drifted: just started, or loaded)")
        out.append(Observed(workload=wl, strategy=strategy, fabric=fabric, step_ci95=_step_ci(fig, runs),
                            step_s=statistics.median(r.median_step_s for r in runs),
                            samples_per_s=statistics.median(sps) if sps else None,
                            global_batch=runs[0].global_batch, comm=comm, runs=len(runs), comms=comms,
                            placement=placement(runs[0].gpus), cores_per_rank=_cores_per_rank(runs[0])))
    return out, problems


def _cores_per_rank(run: TrainResult) -> float | None:
    """The run's host's cores (host_load.cpus) over the ranks it ran there (procs_per_node)."""
    extra = run.extra if isinstance(run.extra, dict) else {}
    cpus = (hostload.of(run) or {}).get("cpus")
    ranks = extra.get("procs_per_node") or run.reached("nranks")
    return cpus / ranks if isinstance(cpus, (int, float)) and isinstance(ranks, int) and ranks > 0 else None


def _own_ci(run: TrainResult) -> float | None:
    """A run's own relative 95% half-width of its median step, where it says one."""
    v = (run.reached("step_time") or {}).get("ci95_rel")
    return float(v) if isinstance(v, (int, float)) else None


def _runs_apart(runs: list[TrainResult]) -> str | None:
    """The runs' steps with their own intervals, where two of those intervals do not overlap (each run
    alone claims a step the other excludes); None where they all overlap or say no interval."""
    spans = [(r.median_step_s, around(r.median_step_s, rel)) for r in runs if (rel := _own_ci(r)) is not None]
    if len(spans) < 2 or max(lo for _, (lo, _) in spans) <= min(hi for _, (_, hi) in spans):
        return None
    return ", ".join(f"{s * 1e3:.3g} ms [{lo * 1e3:.3g}-{hi * 1e3:.3g}]" for s, (lo, hi) in spans)


FEW_RUNS = 3  # below this many runs the run-to-run interval alone can be a coincidence


def _step_ci(fig: repeats.Figure, runs: list[TrainResult]) -> tuple[float, float] | None:
    """The step's 95% interval: run to run (repeats.py), but with fewer than FEW_RUNS runs never narrower
    than the runs' own (the median of their within-run intervals, around the combined step). Two runs that
    agree by chance give a run-to-run interval of ±0.2% where each run's own is ±14% (a CPU lab,
    DDP on default): an interval that held nothing of the next run."""
    ci = fig.step_ci95
    if len(runs) >= FEW_RUNS:
        return ci
    rels = [v for r in runs if (v := _own_ci(r)) is not None]
    if not rels:
        return ci
    own = statistics.median(rels)
    lo, hi = around(fig.step_s, own)
    return (min(ci[0], lo), max(ci[1], hi)) if ci else (lo, hi)
