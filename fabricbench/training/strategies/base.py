"""What a training strategy is: how to build its Accelerator, and what it promises to shard.

    fabricbench train --strategy zero2 --model tiny-mistral --device cpu --nprocs 2

Every strategy module fills one Strategy and registers it in fabricbench/training/strategies/__init__.py.
`make_accelerator` has the same keyword-only signature everywhere; the harness never switches on the name.
`shards` is the promise that fabricbench/training/verify.py checks against the bytes each rank holds;
`textbook_sends` is what the strategy sends per step in theory, which fabricbench/training/trace.py sets
against what the profiler saw it send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

PARAMS, GRADS, OPTIMIZER = "params", "grads", "optimizer"


class MakeAccelerator(Protocol):
    def __call__(self, *, batch_size: int, layer_classes: list[str], device: str, precision: str) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Strategy:
    name: str  # the --strategy value
    description: str  # one line for --list
    engine: str  # the wrapper that must be found after prepare: "ddp", "deepspeed" or "fsdp"
    zero_stage: int | None  # DeepSpeed's stage, checked on the engine
    shards: frozenset[str]  # which of PARAMS, GRADS, OPTIMIZER each rank holds only 1/n of
    # collective -> S per step (nccl-tests' size) in units of Ψ·b, b the communicated element (2 bytes in
    # 16-bit, 4 in fp32); docs/domain.md "Strategies": DDP all-reduces the gradients once; ZeRO-1/2
    # reduce-scatter them and all-gather the updated parameters; ZeRO-3/FSDP gather the parameters in
    # forward and again in backward and reduce-scatter the gradients
    textbook_sends: dict[str, float]
    make_accelerator: MakeAccelerator
    unavailable: Callable[[], str | None]  # None when it can run here, else why not ("waived: ...")


def always_available() -> str | None:
    return None


PRECISIONS = ("bf16", "fp16", "fp32")  # --precision: 16-bit compute with fp32 (or DeepSpeed's) master state, or all fp32


def default_precision(device: str) -> str:
    """bf16 on GPUs (what the reference study trained in); fp32 on CPU, where bf16 autocast runs matmuls
    ~20x slower than fp32 (docs/domain.md) and would hide the fabric behind compute."""
    return "bf16" if device == "cuda" else "fp32"


def accelerate_precision(precision: str) -> str:
    """--precision -> Accelerate's mixed_precision (fp32 is "no": no autocast, no loss scaling)."""
    assert precision in PRECISIONS, precision
    return "no" if precision == "fp32" else precision
