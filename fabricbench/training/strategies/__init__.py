"""The training strategies, one module each, in the order of the dial DDP -> ZeRO-1 -> 2 -> 3 -> FSDP.

    fabricbench train --list

Adding a strategy is one module that fills a Strategy (base.py) and one line here.
"""

from __future__ import annotations

from fabricbench.registry import Registry
from fabricbench.training.strategies import ddp, fsdp, zero1, zero2, zero3
from fabricbench.training.strategies.base import GRADS, OPTIMIZER, PARAMS, PRECISIONS, Strategy, default_precision

STRATEGIES: Registry[Strategy] = Registry("strategy")
for _module in (ddp, zero1, zero2, zero3, fsdp):
    STRATEGIES.register(_module.STRATEGY.name, _module.STRATEGY)

__all__ = ["GRADS", "OPTIMIZER", "PARAMS", "PRECISIONS", "STRATEGIES", "Strategy", "default_precision"]
