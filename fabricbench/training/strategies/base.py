"""What a training strategy is: how to build its Accelerator, and what it promises to shard.

    fabricbench train --strategy zero2 --model tiny-mistral --device cpu --nprocs 2

Every strategy module fills one Strategy and registers it in fabricbench/training/strategies/__init__.py.
`make_accelerator` has the same keyword-only signature everywhere; the harness never switches on the name.
`shards` is the promise that fabricbench/training/verify.py checks against the bytes each rank holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

PARAMS, GRADS, OPTIMIZER = "params", "grads", "optimizer"


class MakeAccelerator(Protocol):
    def __call__(self, *, batch_size: int, layer_classes: list[str], device: str) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Strategy:
    name: str  # the --strategy value
    description: str  # one line for --list
    engine: str  # the wrapper that must be found after prepare: "ddp", "deepspeed" or "fsdp"
    zero_stage: int | None  # DeepSpeed's stage, checked on the engine
    shards: frozenset[str]  # which of PARAMS, GRADS, OPTIMIZER each rank holds only 1/n of
    make_accelerator: MakeAccelerator
    unavailable: Callable[[], str | None]  # None when it can run here, else why not ("waived: ...")


def always_available() -> str | None:
    return None


MIXED_PRECISION = "bf16"  # the same for every strategy: bf16 compute, fp32 (or DeepSpeed's) master state
