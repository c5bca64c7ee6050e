"""DeepSpeed ZeRO through Accelerate's DeepSpeedPlugin; zero1.py, zero2.py and zero3.py pick the stage.

    fabricbench train --strategy zero3 --model mistral-1b --gpus 0

The DeepSpeed config is written out in full (no "auto" values), so what ran is what this file says: bf16
or fp16 (dynamic loss scaling) as --precision says, or neither for fp32, micro-batch = --batch-size, no accumulation, no offload, the client AdamW wrapped by ZeRO.
On CPU DeepSpeed needs DS_ACCELERATOR=cpu, which the launcher sets for --device cpu.
"""

from __future__ import annotations

import os
from typing import Any

from fabricbench.training.strategies.base import Strategy, accelerate_precision


def deepspeed_config(*, stage: int, batch_size: int, precision: str) -> dict[str, Any]:
    return {
        "train_micro_batch_size_per_gpu": batch_size,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16"},
        "zero_optimization": {"stage": stage, "overlap_comm": False, "contiguous_gradients": True},
        "zero_allow_untested_optimizer": True,  # the same torch AdamW as every other strategy
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def make(stage: int, *, batch_size: int, device: str, precision: str) -> Any:
    from accelerate import Accelerator, DeepSpeedPlugin

    # Accelerate turns to DeepSpeed only when this is set before the state is built (accelerate/state.py).
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    plugin = DeepSpeedPlugin(hf_ds_config=deepspeed_config(stage=stage, batch_size=batch_size, precision=precision))
    return Accelerator(mixed_precision=accelerate_precision(precision), deepspeed_plugin=plugin)


def unavailable() -> str | None:
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        return "waived: DeepSpeed is not installed (pip install 'fabricbench[train]')"
    return None


def strategy(stage: int, *, description: str, shards: frozenset[str], textbook_sends: dict[str, float]) -> Strategy:
    """The Strategy of one ZeRO stage (zero1.py, zero2.py, zero3.py each call this once)."""

    def make_accelerator(*, batch_size: int, layer_classes: list[str], device: str, precision: str) -> Any:
        return make(stage, batch_size=batch_size, device=device, precision=precision)

    return Strategy(name=f"zero{stage}", description=description, engine="deepspeed", zero_stage=stage,
                    shards=shards, textbook_sends=textbook_sends, make_accelerator=make_accelerator,
                    unavailable=unavailable)
