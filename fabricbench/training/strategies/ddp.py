"""Plain data parallelism: every rank holds the whole model, its gradients and Adam's state.

    fabricbench train --strategy ddp --model dinov2-base --gpus 0-3

Accelerate wraps the model in torch's DistributedDataParallel and autocasts to bf16; parameters,
gradients and optimizer states stay fp32 and whole on every rank.
"""

from __future__ import annotations

from typing import Any

from fabricbench.training.strategies.base import MIXED_PRECISION, Strategy, always_available


def make_accelerator(*, batch_size: int, layer_classes: list[str], device: str) -> Any:
    from accelerate import Accelerator

    return Accelerator(mixed_precision=MIXED_PRECISION, cpu=device == "cpu")


STRATEGY = Strategy(name="ddp", description="DistributedDataParallel: nothing sharded, gradients all-reduced",
                    engine="ddp", zero_stage=None, shards=frozenset(), make_accelerator=make_accelerator,
                    unavailable=always_available)
