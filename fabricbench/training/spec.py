"""What one training rank is told: RankSpec, written once by the launcher (spec.json), read by every rank.

    spec = RankSpec.of(config, "ddp", run_dir=ws, fabric="default", fault=None)   # training/launch.py
    spec.write(ws / "spec.json"); RankSpec.read(ws / "spec.json")                  # training/worker.py

Every field is required: the values come from TrainConfig (training/config.py, the one set of defaults)
through `of`, so a rank never falls back on a default of its own, and a spec that lacks a field, or has
one this version does not know, is refused by `read` (a worker of another version) instead of run with a
guess. `fault` is the fault a test asked for (training/faults.py), decided once by the launcher; None in
every other run, and then the rank's step has no fault point at all.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricbench.jobs.secrets import write_private

SEED = 0  # every rank, every run: the same initial weights and batches (the runs differ only in timing)


@dataclass(frozen=True, kw_only=True)
class RankSpec:
    strategy: str
    model: str | None
    model_config: str | None
    model_path: str | None
    device: str  # "cuda" or "cpu"
    backend: str  # the process group's backend, decided (TrainConfig.run_backend)
    precision: str  # decided (TrainConfig.run_precision)
    local_devices: list[int] | None  # the CUDA index of each local rank where ranks share GPUs
    batch_size: int
    seq_len: int
    image_size: int
    dataset: str | None
    lr: float
    seed: int
    steps: int  # at least, warm-up included
    warmup_steps: int
    target_ci: float | None  # step on until the median's CI is within it (None: exactly `steps`)
    max_steps: int  # the cap with target_ci (TrainConfig.step_cap)
    trace_steps: int
    stall_timeout_s: float | None
    run_dir: str
    fabric: str
    fault: str | None  # training/faults.py: the injected fault's message, None in a normal run

    @classmethod
    def of(cls, config: Any, strategy: str, *, run_dir: Path | str, fabric: str, fault: str | None,
           local_devices: list[int] | None) -> "RankSpec":
        """The spec of `strategy`'s ranks under a validated TrainConfig."""
        return cls(strategy=strategy, model=config.model, model_config=config.model_config,
                   model_path=config.model_path, device=config.device, backend=config.run_backend,
                   precision=config.run_precision, local_devices=local_devices, batch_size=config.batch_size,
                   seq_len=config.seq_len, image_size=config.image_size, dataset=config.dataset, lr=config.lr,
                   seed=SEED, steps=config.steps, warmup_steps=config.warmup_steps, target_ci=config.target_ci,
                   max_steps=config.step_cap, trace_steps=config.trace_steps_run,
                   stall_timeout_s=config.stall_timeout_s, run_dir=str(run_dir), fabric=fabric, fault=fault)

    def write(self, path: Path) -> None:
        write_private(path, json.dumps(dataclasses.asdict(self)))  # only this user may read it

    @classmethod
    def read(cls, path: Path | str) -> "RankSpec":
        doc = json.loads(Path(path).read_text())
        names = {f.name for f in dataclasses.fields(cls)}
        missing, unknown = sorted(names - set(doc)), sorted(set(doc) - names)
        if missing or unknown:
            raise ValueError(f"{path}: not a spec of this fabricbench (missing {missing}, unknown {unknown}); "
                             f"the launcher and its ranks must be one version")
        return cls(**doc)
