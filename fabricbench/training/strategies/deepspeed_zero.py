"""DeepSpeed ZeRO through Accelerate's DeepSpeedPlugin; zero1.py, zero2.py and zero3.py pick the stage.

    fabricbench train --strategy zero3 --model mistral-1b --gpus 0

The DeepSpeed config is written out in full (no "auto" values), so what ran is what this file says: bf16
on, micro-batch = --batch-size, no accumulation, no offload, the client AdamW wrapped by ZeRO.
On CPU DeepSpeed needs DS_ACCELERATOR=cpu, which the launcher sets for --device cpu.
"""

from __future__ import annotations

import os
from typing import Any

from fabricbench.training.strategies.base import MIXED_PRECISION, Strategy


def deepspeed_config(*, stage: int, batch_size: int) -> dict[str, Any]:
    return {
        "train_micro_batch_size_per_gpu": batch_size,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": stage, "overlap_comm": False, "contiguous_gradients": True},
        "zero_allow_untested_optimizer": True,  # the same torch AdamW as every other strategy
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def make(stage: int, *, batch_size: int, device: str) -> Any:
    from accelerate import Accelerator, DeepSpeedPlugin

    # Accelerate turns to DeepSpeed only when this is set before the state is built (accelerate/state.py).
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    plugin = DeepSpeedPlugin(hf_ds_config=deepspeed_config(stage=stage, batch_size=batch_size))
    return Accelerator(mixed_precision=MIXED_PRECISION, deepspeed_plugin=plugin)


def unavailable() -> str | None:
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        return "waived: DeepSpeed is not installed (pip install 'fabricbench[train]')"
    return None


def strategy(stage: int, *, description: str, shards: frozenset[str]) -> Strategy:
    """The Strategy of one ZeRO stage (zero1.py, zero2.py, zero3.py each call this once)."""

    def make_accelerator(*, batch_size: int, layer_classes: list[str], device: str) -> Any:
        return make(stage, batch_size=batch_size, device=device)

    return Strategy(name=f"zero{stage}", description=description, engine="deepspeed", zero_stage=stage,
                    shards=shards, make_accelerator=make_accelerator, unavailable=unavailable)
