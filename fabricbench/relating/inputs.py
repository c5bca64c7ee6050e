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

from fabricbench.errors import UsageError
from fabricbench.results import records as results_records
from fabricbench.results.status import TIMED_TRAIN
from fabricbench.training import repeats

USABLE_TRAIN = tuple(TIMED_TRAIN)  # "flagged": the loss did not fall, but the step was timed all the same


def load(records_or_paths: Any, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Records from paths (JSONL written by fabricbench), dicts, or objects with to_dict(), in order.

    Every record is checked as results/records.py checks a file's (types per kind); one that fails is
    left out with a sentence in `problems`. A file with no readable record at all is a UsageError.
    """
    if isinstance(records_or_paths, (str, os.PathLike, dict)) or hasattr(records_or_paths, "to_dict"):
        records_or_paths = [records_or_paths]
    problems = [] if problems is None else problems
    out: list[dict[str, Any]] = []
    for item in records_or_paths:
        if hasattr(item, "to_dict") and not isinstance(item, dict):
            item = item.to_dict()
        if isinstance(item, dict):
            why = results_records.check_record(item)
            if why:
                problems.append(f"record {str(item.get('kind'))[:40]}: {why}; left out")
            else:
                out.append(item)
        elif isinstance(item, (str, os.PathLike)):
            got = results_records.read_nonempty(Path(item), what="input")
            problems.extend(got.warnings)
            out.extend(got.records)
        else:
            raise UsageError(f"relate takes paths, record dicts or results, not {type(item).__name__}")
    return out


def precision_of(rec: dict[str, Any]) -> str:
    return str(rec.get("precision") or rec.get("mixed_precision") or "?")


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
    def of(cls, rec: dict[str, Any]) -> "Workload":
        return cls(model=str(rec.get("model")), nranks=int(rec.get("nranks") or rec.get("world_size") or 0),
                   precision=precision_of(rec), batch_size=rec.get("batch_size"), seq_len=rec.get("seq_len"),
                   image_size=rec.get("image_size"), device=rec.get("device"))

    def label(self) -> str:
        return f"{self.model}, {self.nranks} ranks, {self.precision}, batch {self.batch_size}"


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


def observations(trains: Iterable[dict[str, Any]]) -> tuple[list[Observed], list[str]]:
    """Usable train records combined per (workload, strategy, fabric); problems for the rest."""
    groups: dict[tuple[Workload, str, str], list[dict[str, Any]]] = {}
    problems: list[str] = []
    for rec in trains:
        strategy, fabric = rec.get("strategy"), rec.get("fabric") or "default"
        step = (rec.get("step_time") or {}).get("median_s")
        if rec.get("status") not in USABLE_TRAIN or not step or step <= 0:
            why = rec.get("message") or "no timed step"
            problems.append(f"train record {strategy} on fabric {fabric}: status {rec.get('status')} "
                            f"({why}); left out")
            continue
        groups.setdefault((Workload.of(rec), str(strategy), str(fabric)), []).append(rec)
    out = []
    for (wl, strategy, fabric), recs in groups.items():
        sps = [r["throughput"]["samples_per_s"] for r in recs
               if (r.get("throughput") or {}).get("samples_per_s")]
        comm = next((r["comm"] for r in recs if isinstance(r.get("comm"), dict)), None)
        fig = repeats.figures(recs)[0]  # the one statistics rule (measuring/stats.py via repeats.py)
        out.append(Observed(workload=wl, strategy=strategy, fabric=fabric, step_ci95=fig.step_ci95,
                            step_s=statistics.median(r["step_time"]["median_s"] for r in recs),
                            samples_per_s=statistics.median(sps) if sps else None,
                            global_batch=recs[0].get("global_batch"), comm=comm, runs=len(recs)))
    return out, problems
