"""The engines a sweep can run on: one module each, one row each below.

    fabricbench sweep --engine native      (compiled core, NCCL loaded at run time)
    fabricbench sweep --engine torch       (torch.distributed: nccl or gloo)

Each module provides `open_session(config, dist) -> Session` (fabricbench/measuring/session.py) and is
imported only when a sweep uses it, so `import fabricbench` stays free of torch and CUDA.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fabricbench.registry import Registry


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    name: str
    module: str
    description: str

    def open_session(self, config, dist):
        return importlib.import_module(self.module).open_session(config, dist)


ENGINES: Registry[EngineSpec] = Registry("engine")
ENGINES.register("native", EngineSpec(
    name="native", module="fabricbench.measuring.engines.native",
    description="compiled C++/CUDA core: one process drives any GPU list, CUDA-event timing per GPU"))
ENGINES.register("torch", EngineSpec(
    name="torch", module="fabricbench.measuring.engines.torch_engine",
    description="torch.distributed (nccl or gloo): what a PyTorch user measures; runs without a GPU"))
