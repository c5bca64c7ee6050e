"""What the study report's sections share: byte units, the temporary folder of figures, and the
records each section picks (a unit kind's collectives, the train run per strategy and fabric).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fabricbench.statistics.figures import around
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.sizes import format_size, gib  # noqa: F401  (gib: the report's GiB cells)
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.kinds import unit_of
from fabricbench.studying.units import INTRA
from fabricbench.training import repeats


def mib(b: Any) -> float | None:
    return b / 2**20 if isinstance(b, (int, float)) else None


def size_text(b: int) -> str:
    return format_size(int(b))


class Figs:
    """PNG files in a temporary folder; Document embeds their bytes."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="fabricbench-report-")
        self.n = 0

    def path(self, stem: str) -> str:
        self.n += 1
        return str(Path(self._tmp.name) / f"{self.n:02d}-{stem}.png")

    def close(self) -> None:
        self._tmp.cleanup()


def unit_records(colls: list[CollectiveResult], kind: str) -> list[CollectiveResult]:
    """The collectives a study unit of this kind wrote ("sweep", "scaling"); imported ones name no unit."""
    return [r for r in colls if (unit_of(r) or "").startswith(kind)]


def gpu_name(machine: dict[str, Any] | None) -> str:
    gpus = (machine or {}).get("gpus") or []
    return gpus[0]["name"] if gpus else "GPU"


def batch_of(trains: list[TrainResult], c: StudyConfig) -> Any:
    """The per-GPU batch the train runs used (the study's, or the one it picked)."""
    return next((r.batch_size for r in trains if r.batch_size), c.batch_size)


def throughputs(trains: list[TrainResult]) -> dict[tuple[str, str], TrainResult]:
    return {(r.strategy, r.fabric): r for r in trains}


def sps(r: TrainResult | None) -> float | None:
    return r.samples_per_s if r else None


def question_summary(trains: list[TrainResult], c: StudyConfig) -> dict[str, Any]:
    """repeats.summary with the study's question: its fabrics (the first the reference), strategies,
    margin and looks, so the report, `report --json` and the stopping rule judge alike."""
    return repeats.summary(trains, fabrics=list(c.fabrics), reference=c.fabrics[0], strategies=list(c.strategies),
                           margin=c.margin, **c.looks)


def busbw_ci(r: CollectiveResult) -> tuple[float, float] | None:
    """busbw's interval from its median time's 95% CI (busbw = S / t x factor, so busbw / (1 + rel) to
    busbw x (1 + rel)); below 6 timed iterations (no CI: statistics/figures.py) the range of the iterations'
    times, [min, max], which holds the median with probability 1 - 2^(1-n) (94% at 5)."""
    if not r.busbw_gbps:
        return None
    if r.ci95_rel is not None:
        return around(r.busbw_gbps, r.ci95_rel)
    if r.time_us and r.min_us and r.max_us and r.iters >= 5:
        return r.busbw_gbps * r.time_us / r.max_us, r.busbw_gbps * r.time_us / r.min_us
    return None


def waived_fabrics(sr: Any, c: StudyConfig) -> dict[str, str]:
    """fabric -> why, for each fabric whose first-round units were all waived with one reason (a fabric
    that changes nothing on the study's backend: studying/plan.waived)."""
    out = {}
    for f in c.fabrics:
        units = [u for u in sr.units.values() if u.get("fabric") == f and "#" not in str(u.get("name"))
                 and u.get("unit_kind") in ("train", "sweep") and not str(u.get("name")).startswith(INTRA)]
        why = {u.get("message") for u in units}
        if units and all(u.get("status") == Status.WAIVED for u in units) and len(why) == 1 and None not in why:
            out[f] = why.pop()
    return out
