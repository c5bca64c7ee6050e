"""DeepSpeed ZeRO stage 1 through Accelerate (the config is in deepspeed_zero.py).

    fabricbench train --strategy zero1 --model mistral-1b --gpus 0-3
"""

from __future__ import annotations

from fabricbench.training.strategies import deepspeed_zero
from fabricbench.training.strategies.base import OPTIMIZER

STRATEGY = deepspeed_zero.strategy(1, description="ZeRO-1: optimizer states (fp32 master, m, v) sharded", shards=frozenset({OPTIMIZER}),
                                  textbook_sends={"reduce_scatter": 1, "all_gather": 1})
