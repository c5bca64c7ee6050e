"""`fabricbench.train(config)`: the library call behind `fabricbench train`.

    import fabricbench
    cfg = fabricbench.TrainConfig(strategies="ddp,fsdp", model="tiny-mistral", device="cpu", nprocs=2, steps=6)
    t = fabricbench.train(cfg, out="t.jsonl")
    [(r.strategy, r.status, r.samples_per_s) for r in t.records]     # t.to_dict(): what --json prints

Each strategy runs in fresh processes as a job (fabricbench/jobs): a rank that makes no
progress for `timeout_s` is named and every rank killed. One record per run (a TrainResult, kind "train"),
written to `out` as it ends; a failed run is a record with status "error", not an exception (the CLI
exits 1 for it: TrainRunResult.failed). The CLI builds the same TrainConfig from its flags.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from fabricbench.cluster.env import on_slurm
from fabricbench.errors import UsageError, expect_config
from fabricbench.gpus import default_gpus, visible_gpu_count
from fabricbench.results import ResultWriter
from fabricbench.results.schema import TrainResult
from fabricbench.training import launch
from fabricbench.training.config import TrainConfig, require_libraries
from fabricbench.training.result import TrainRunResult
from fabricbench.training.strategies import STRATEGIES


def strategy_names(strategies: str | Sequence[str]) -> list[str]:
    """"all", a comma text or a list -> the registered names, in the order given (Registry.pick)."""
    return STRATEGIES.pick(strategies, option="strategies")


def placed(config: TrainConfig) -> TrainConfig:
    """`config` as it will run: its strategies by name ("all" or a comma text resolved), its GPUs (device
    cuda: those named, else every visible one; none visible is refused), and its nodes
    from Slurm where it names none (cluster/env.on_slurm)."""
    gpus: tuple[int, ...] = ()
    if config.device == "cuda":
        visible = visible_gpu_count()
        if visible == 0:
            raise UsageError("no CUDA GPU is visible here", hint={"device": "cpu", "nprocs": 2},
                             hint_text="train on CPU with")
        gpus = tuple(default_gpus(",".join(map(str, config.gpus)) or None, visible=visible))
    return on_slurm(dataclasses.replace(config, strategies=strategy_names(config.strategies), gpus=gpus))


def train(config: TrainConfig, *, out: str | None = None, echo: Callable[[dict[str, Any]], None] | None = None,
          quiet: bool = False, since: float | None = None) -> TrainRunResult:
    """Train config's model under each of its strategies and return a record per run.

    `echo` sees each record (the dict written) as it is written; progress (each rank's step) goes to
    stderr unless `quiet` (fabricbench/progress.py). `since`: when the user's wait began, where the first
    run's phases start (the CLI: its process's start; default now)."""
    expect_config(config, TrainConfig, "train")
    config = placed(config)  # checked again as placed (its GPUs, strategies and nodes decided)
    require_libraries()  # before out is opened or anything starts
    with ResultWriter(out) as writer:  # launch.run looked up on call: tests stand in for it
        records = launch.run(config, writer, echo=echo, quiet=quiet, since=since)
    return TrainRunResult(records=tuple(TrainResult.from_dict(r) for r in records),
                          out=str(out) if out is not None else None)
