"""fabricbench: measure NCCL collectives over any GPU set and fabric, and what they do to training.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", gpus=[0, 1])        # one CollectiveResult
    rs = fabricbench.sweep(ops=["all_gather"], sizes="1M-1G:x4")     # a list of them
    fabricbench.to_dataframe(rs)                                      # pandas, if installed

Importing needs no GPU and no torch: everything heavy loads on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "measure": "fabricbench.measuring.api",
    "sweep": "fabricbench.measuring.api",
    "to_dataframe": "fabricbench.measuring.api",
    "SweepConfig": "fabricbench.measuring.config",
    "SizeSweep": "fabricbench.sizes",
    "CollectiveResult": "fabricbench.results.schema",
    "COLLECTIVES": "fabricbench.collectives",
    "ENGINES": "fabricbench.measuring.engines",
    "read_results": "fabricbench.results.writer",
    "relate": "fabricbench.relating.api",
    "study": "fabricbench.study.api",
    "advise": "fabricbench.advise.api",
    "qualify": "fabricbench.qualifying.api",
    "import_results": "fabricbench.importing",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fabricbench' has no attribute {name!r}")
