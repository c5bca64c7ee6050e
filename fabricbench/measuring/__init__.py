"""Measuring collectives: the config, the plan, the engines and the runner.

    fabricbench sweep --gpus 0-7
"""

from __future__ import annotations

from typing import Any


def run_sweep(config, **kwargs: Any):
    """See fabricbench.measuring.runner.run_sweep (imported lazily: it pulls in no engine until it runs)."""
    from fabricbench.measuring.runner import run_sweep as _run

    return _run(config, **kwargs)
