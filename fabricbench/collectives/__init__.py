"""The collectives fabricbench can time: one module each, one row each below.

    fabricbench sweep --ops all_reduce,all_gather,reduce_scatter
"""

from __future__ import annotations

from fabricbench.collectives.all_gather import ALL_GATHER
from fabricbench.collectives.all_reduce import ALL_REDUCE
from fabricbench.collectives.all_to_all import ALL_TO_ALL
from fabricbench.collectives.base import Collective, Sizing
from fabricbench.collectives.broadcast import BROADCAST
from fabricbench.collectives.reduce_scatter import REDUCE_SCATTER
from fabricbench.registry import Registry

COLLECTIVES: Registry[Collective] = Registry("op")
COLLECTIVES.register("all_reduce", ALL_REDUCE)
COLLECTIVES.register("all_gather", ALL_GATHER)
COLLECTIVES.register("reduce_scatter", REDUCE_SCATTER)
COLLECTIVES.register("broadcast", BROADCAST)
COLLECTIVES.register("all_to_all", ALL_TO_ALL)

# What a sweep runs when --ops is not given: the three that data-parallel training depends on.
DEFAULT_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def busbw_factor(op: str | None, nranks: int | None) -> float | None:
    """The bus-bandwidth factor of `op` on `nranks` ranks (0 for one rank: busbw means nothing there), or None
    where the op is not one of these or the rank count is unknown (never guessed; an imported record keeps
    it null, relate counts no bus bytes for it)."""
    if op is None or not nranks or op not in COLLECTIVES.names():
        return None
    return COLLECTIVES.get(op).busbw_factor(nranks)

def listing() -> list[str]:
    """`fabricbench sweep --list-ops`: one line per collective with its bus-bandwidth factor."""
    return [f"{c.name:16s} busbw = algbw x {c.factor_text:9s} {c.description}" for c in COLLECTIVES]


__all__ = ["COLLECTIVES", "DEFAULT_OPS", "Collective", "Sizing", "busbw_factor", "listing"]
