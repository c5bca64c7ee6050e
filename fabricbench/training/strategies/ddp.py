"""Plain data parallelism: every rank holds the whole model, its gradients and Adam's state.

    fabricbench train --strategy ddp --model dinov2-base --gpus 0-3

Accelerate wraps the model in torch's DistributedDataParallel and autocasts to bf16 (or fp16, or not at
all with --precision fp32); parameters, gradients and optimizer states stay fp32 and whole on every rank.
"""

from __future__ import annotations

from typing import Any

from fabricbench.training.strategies.base import Strategy, accelerate_precision, always_available


def make_accelerator(*, batch_size: int, layer_classes: list[str], device: str, precision: str) -> Any:
    from accelerate import Accelerator

    return Accelerator(mixed_precision=accelerate_precision(precision), cpu=device == "cpu")


STRATEGY = Strategy(name="ddp", description="DistributedDataParallel: nothing sharded, gradients all-reduced",
                    engine="ddp", zero_stage=None, shards=frozenset(), textbook_sends={"all_reduce": 1},
                    make_accelerator=make_accelerator, unavailable=always_available)
