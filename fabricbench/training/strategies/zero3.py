"""DeepSpeed ZeRO stage 3 through Accelerate (the config is in deepspeed_zero.py).

    fabricbench train --strategy zero3 --model mistral-1b --gpus 0-3
"""

from __future__ import annotations

from fabricbench.training.strategies import deepspeed_zero
from fabricbench.training.strategies.base import GRADS, OPTIMIZER, PARAMS

STRATEGY = deepspeed_zero.strategy(3, description="ZeRO-3: + parameters sharded, gathered per layer", shards=frozenset({PARAMS, GRADS, OPTIMIZER}),
                                  textbook_sends={"all_gather": 2, "reduce_scatter": 1})
