"""What a study's sweeps measure: sizes covering what the strategies sent, and, across nodes, the sweep
as one job of every node's ranks (torchrun on each node, as docs/multinode.md's recipe starts it).

    sweep_plan(ctx)          # [{dtype, ops, sizes, source}]: one child sweep each
    spanning(config, argv, n)   # the sweep argv as node n's share of a sweep across the nodes
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from fabricbench import dtypes
from fabricbench.collectives import COLLECTIVES
from fabricbench.sizes import format_size
from fabricbench.studying.config import DEFAULT_SIZES, SWEEP_OPS, StudyConfig

if TYPE_CHECKING:  # the sweep and scaling units import this module: the annotation only
    from fabricbench.studying.units.base import Context


def traced_sizes(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """dtype -> {"ops": [...], "min": bytes, "max": bytes} over the collectives the train records traced."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("kind") != "train":
            continue
        for col in ((rec.get("comm") or {}).get("collectives") or []):
            op, size, dt = col.get("op"), col.get("bytes"), col.get("dtype")
            if op not in COLLECTIVES or not isinstance(size, int) or size <= 0 or not dt:
                continue
            try:
                dt = dtypes.resolve(str(dt).replace("torch.", ""))
            except Exception:  # a dtype the sweep cannot run (e.g. int64 bookkeeping): not a bandwidth size
                continue
            d = out.setdefault(dt, {"ops": [], "min": size, "max": size})
            if op not in d["ops"]:
                d["ops"].append(op)
            d["min"], d["max"] = min(d["min"], size), max(d["max"], size)
    return out


def covering_sizes(lo: int, hi: int) -> str:
    """A power-of-two grid from below `lo` to above `hi` (factor 2, or 4 when that would exceed 12 points)."""
    a = 2 ** max(3, math.floor(math.log2(lo)))
    b = 2 ** math.ceil(math.log2(max(hi, lo)))
    factor = 2 if math.log2(b / a) <= 11 else 4
    a = max(8, a // factor)  # one point below and above, so interpolation never extrapolates at the ends
    b = b * factor
    return f"{format_size(a)}-{format_size(b)}:x{factor}"


def sweep_plan(ctx: Context) -> list[dict[str, Any]]:
    """[{dtype, ops, sizes, source}] for each sweep child a fabric gets."""
    c = ctx.config
    if c.sizes is not None:
        return [{"dtype": "float32", "ops": list(SWEEP_OPS), "sizes": c.sizes, "source": "--sizes"}]
    traced = traced_sizes(ctx.records)
    if not traced:
        return [{"dtype": "float32", "ops": list(SWEEP_OPS), "sizes": DEFAULT_SIZES[c.device],
                 "source": "default grid (no trace recorded a collective)"}]
    return [{"dtype": dt, "ops": sorted(d["ops"]), "sizes": covering_sizes(d["min"], d["max"]),
             "source": f"traces: {len(d['ops'])} op(s) from {d['min']} to {d['max']} B"}
            for dt, d in sorted(traced.items())]


def spanning(config: StudyConfig, argv: list[str], node: int) -> list[str]:
    """A child `fabricbench sweep` argv (python -m fabricbench sweep ...) as node `node`'s share of one
    sweep over every node's ranks: torchrun starts this node's ranks, the nodes meet on MASTER_PORT + 1
    within --join-timeout (torchrun's own rendezvous wait is 600 s otherwise), and rank 0 (node 0) writes."""
    assert argv[:3] == [sys.executable, "-m", "fabricbench"], argv
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(config.nnodes),
            "--nproc-per-node", str(config.ranks_per_node), "--node-rank", str(node),
            "--master-addr", str(config.master_addr), "--master-port", str(int(config.master_port) + 1),
            "--rdzv-conf", f"timeout={max(1, math.ceil(config.join_timeout_s))}", *argv[1:]]
