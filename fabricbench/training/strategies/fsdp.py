"""PyTorch FSDP (version 2, fully_shard) through Accelerate's FullyShardedDataParallelPlugin, full sharding.

    fabricbench train --strategy fsdp --model dinov2-large --gpus 0-3

Each transformer block is one FSDP unit; parameters are resharded after forward (FULL_SHARD). With bf16
mixed precision the sharded parameters, gradients and Adam states stay fp32; the bf16 copies of one unit
exist only while it computes.

Accelerate applies an FSDP plugin only on accelerator devices: on CPU (gloo) it keeps MULTI_CPU and trains
plain DDP without a word (accelerate/state.py lists the device types). For --device cpu we therefore set
the state's distributed type to FSDP before prepare(); fabricbench/training/verify.py proves that the model
came back sharded, on CPU and GPU alike.
"""

from __future__ import annotations

from typing import Any

from fabricbench.training.strategies.base import GRADS, OPTIMIZER, PARAMS, Strategy, accelerate_precision
from fabricbench.training.strategies.base import always_available


def make_accelerator(*, batch_size: int, layer_classes: list[str], device: str, precision: str) -> Any:
    from accelerate import Accelerator, FullyShardedDataParallelPlugin
    from accelerate.utils import DistributedType

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True,
                                            auto_wrap_policy="transformer_based_wrap",
                                            transformer_cls_names_to_wrap=layer_classes,
                                            state_dict_type="SHARDED_STATE_DICT", cpu_ram_efficient_loading=False)
    mixed = accelerate_precision(precision)
    acc = Accelerator(mixed_precision=mixed, fsdp_plugin=plugin, cpu=device == "cpu")
    if device == "cpu" and acc.state.distributed_type == DistributedType.MULTI_CPU:
        if mixed != "no":
            plugin.set_mixed_precision(mixed)
        acc.state.distributed_type = DistributedType.FSDP
        acc.state.fsdp_plugin = plugin
    return acc


STRATEGY = Strategy(name="fsdp", description="FSDP2 full shard: parameters, gradients, optimizer sharded",
                    engine="fsdp", zero_stage=None, shards=frozenset({PARAMS, GRADS, OPTIMIZER}),
                    textbook_sends={"all_gather": 2, "reduce_scatter": 1}, make_accelerator=make_accelerator, unavailable=always_available)
