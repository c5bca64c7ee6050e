"""What a check's judge asks the context for, with no import of the checks: the run settings, one sweep
unit, and the context's face (Measurements), so that checks/, spec.py and context.py form no circle.

    fabricbench qualify --spec node.toml --out q/

context.Context (a measuring run) and offline.OfflineContext (`--from FILE`) are the two Measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fabricbench.jobs.configs import job_key
from fabricbench.measuring.config import SweepConfig
from fabricbench.qualifying.children import UnitResult
from fabricbench.training.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    engine: str = "native"
    backend: str | None = None
    nprocs: int | None = None
    iters: int = 20
    warmup: int = 5
    timeout_s: float = 300.0
    unit_timeout_s: float = 1800.0
    retries: int = 0
    baseline_tolerance: float = 0.05

    @property
    def cpu_ranks(self) -> bool:
        """gloo ranks: no GPU, no NCCL, no pairs."""
        return self.engine == "torch" and self.backend == "gloo"



@dataclass(frozen=True, kw_only=True)
class SweepUnit:
    fabric: str
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtype: str
    gpus: tuple[int, ...] | None  # None: gloo ranks, or every rank of a torchrun launch
    check: bool
    run: RunSettings

    @property
    def config(self) -> SweepConfig:
        """The sweep that measures this unit (its key whether it runs in a child or in this process), checked
        as every sweep is; the child gets it under the unit's fabric (children.sweep_under)."""
        return SweepConfig(ops=self.ops, sizes=self.sizes, dtype=self.dtype, iters=self.run.iters,
                           warmup=self.run.warmup, engine=self.run.engine, backend=self.run.backend,
                           nprocs=self.nprocs, timeout_s=self.run.timeout_s, check=self.check, fabric=self.fabric,
                           gpus=None if self.run.cpu_ranks else self.gpus)  # gloo ranks drive no GPU

    @property
    def key(self) -> str:
        return job_key(self.config)

    @property
    def nprocs(self) -> int | None:
        if self.run.cpu_ranks:
            return self.run.nprocs
        if self.run.engine == "torch" and self.gpus is not None and len(self.gpus) > 1:
            return len(self.gpus)  # torch drives one GPU per process
        return self.run.nprocs if self.run.engine == "torch" else None



class Measurements(Protocol):
    """What a judge may ask (qualifying/context.py runs each measurement once and records it)."""

    run: RunSettings
    distributed: bool  # under torchrun/srun: every rank makes the same calls
    offline: bool  # recorded results (`--from`): `records` and `source` say what they are
    records: list[dict[str, Any]]
    source: str

    def topology(self) -> Any: ...

    def visible_gpus(self) -> int: ...

    def gpu_sets(self, want: Any) -> tuple[list[tuple[int, ...] | None], str | None]: ...

    def sweep(self, unit: SweepUnit) -> UnitResult: ...

    def copies(self, gpus: tuple[int, ...], size: int, *, peers: bool, host: bool) -> UnitResult: ...

    def train(self, job: TrainConfig) -> UnitResult: ...
