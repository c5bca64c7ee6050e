"""What the NCCL Inspector's JSON and Prometheus outputs share: its collective names and its size convention.

    fabricbench import host-pid4242.log nccl_inspector_metrics_GPU-0a1b.prom --out job.jsonl

NCCL's count for AllGather and ReduceScatter is per rank, so the Inspector's message size is too (its own
busbw code multiplies it by n_ranks); fabricbench's S is the whole buffer (docs/domain.md). s_of_msg converts.
"""

from __future__ import annotations

import re

# The Inspector's `coll` strings (ncclFuncToString) -> our op names
OP_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
            "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all"}
# where S is the printed size x n_ranks (per-rank count in NCCL's API), and where it is the printed size
PER_RANK = {"all_gather": "all-gather: the gathered output", "reduce_scatter": "reduce-scatter: the input"}
WHOLE = ("all_reduce", "broadcast", "reduce")


def s_of_msg(op: str | None, msg: int, nranks: int | None) -> tuple[int | None, str, list[str]]:
    """(S in bytes or None, the rule applied, the fields inferred) for a printed message size."""
    if op in PER_RANK:
        if nranks is None:
            return None, f"{PER_RANK[op]} = per-rank size x n_ranks; n_ranks unknown, S left null", []
        return msg * nranks, f"S = {msg} B per rank x {nranks} ranks ({PER_RANK[op]})", ["bytes"]
    if op in WHOLE:
        return msg, "S = the printed size (the whole buffer for this collective)", []
    return None, "no documented S convention for this collective: S left null, printed size kept", []


_SIZE = re.compile(r"^(\d+)-(\d+)(B|KB|MB|GB|TB)$")
_UNIT = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}


def bucket_bytes(label: str) -> tuple[int, int] | None:
    """'4-5GB' -> [4 GiB, 5 GiB): the Inspector's power-of-1024 buckets of the printed (per-rank) size."""
    m = _SIZE.match(label.strip())
    if not m:
        return None
    unit = _UNIT[m.group(3)]
    return int(m.group(1)) * unit, int(m.group(2)) * unit


def version_tuple(v: object) -> tuple[int, ...]:
    """'v4.3' -> (4, 3); anything else -> ()."""
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)", str(v or ""))
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()
