"""`fabricbench.train(...)`: the library call behind `fabricbench train`.

    import fabricbench
    recs = fabricbench.train("ddp,fsdp", model="tiny-mistral", device="cpu", nprocs=2, steps=6, out="t.jsonl")
    [(r["strategy"], r["status"], r["throughput"]["samples_per_s"]) for r in recs]

Each strategy runs in fresh processes as a job (fabricbench/jobs): a rank that makes no
progress for `timeout_s` is named and every rank killed. One record per strategy (a dict of the common
schema, kind "train"), written to `out` as it ends; a failed strategy is a record with status "error",
not an exception (the CLI exits 1 for it).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from fabricbench.errors import UsageError
from fabricbench.gpus import default_gpus, visible_gpu_count
from fabricbench.results import ResultWriter
from fabricbench.training import launch
from fabricbench.training.launch import TrainConfig
from fabricbench.training.strategies import STRATEGIES


def strategy_names(strategies: str | Sequence[str]) -> list[str]:
    """"all", a comma text or a list -> the registered names, in the order given (Registry.pick)."""
    return STRATEGIES.pick(strategies, option="strategies")


def train(strategies: str | Sequence[str] = "all", *, device: str = "cuda",
          gpus: str | Sequence[int] | None = None, out: str | None = None,
          echo: Callable[[dict[str, Any]], None] | None = None, quiet: bool = False,
          **fields: Any) -> list[dict[str, Any]]:
    """Train one model under each strategy and return one record per strategy.

    `gpus` (device "cuda"): a list or "0-3", default all visible, one process each; `fields`: the other
    TrainConfig fields (model or model_config or model_path, nprocs, steps, warmup_steps, batch_size,
    seq_len, precision, fabric, timeout_s, ...); `echo` sees each record as it is written; progress (each
    rank's step) goes to stderr unless `quiet` (fabricbench/progress.py)."""
    names = strategy_names(strategies)
    gpu_list: tuple[int, ...] = ()
    if device == "cuda":
        visible = visible_gpu_count()
        if visible == 0:
            raise UsageError("no CUDA GPU is visible here", hint={"device": "cpu", "nprocs": 2},
                             hint_text="train on CPU with")
        text = gpus if gpus is None or isinstance(gpus, str) else ",".join(map(str, gpus))
        gpu_list = default_gpus(text or None, visible=visible)
    config = TrainConfig(strategies=names, device=device, gpus=gpu_list, **fields)
    config.validate()  # every field checked before out is opened or anything starts
    with ResultWriter(out) as writer:
        return launch.run(config, writer, echo=echo, quiet=quiet)  # looked up on call: tests stand in for it
