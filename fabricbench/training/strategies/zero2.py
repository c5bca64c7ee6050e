"""DeepSpeed ZeRO stage 2 through Accelerate (the config is in deepspeed_zero.py).

    fabricbench train --strategy zero2 --model mistral-1b --gpus 0-3
"""

from __future__ import annotations

from fabricbench.training.strategies import deepspeed_zero
from fabricbench.training.strategies.base import GRADS, OPTIMIZER

STRATEGY = deepspeed_zero.strategy(2, description="ZeRO-2: + gradients sharded (reduce-scatter)", shards=frozenset({GRADS, OPTIMIZER}),
                                  textbook_sends={"reduce_scatter": 1, "all_gather": 1})
