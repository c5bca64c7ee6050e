"""What NCCL's own profiler event says of a collective: `record_param_comms`, which ProcessGroupNCCL
records around every call (torch 2.1 and later: its args "Collective name", "In msg nelems", "Out msg
nelems", "Group size", "dtype"; 2.0 named the counts "In msg size" and "Out msg size", and older traces
carry only the tensors' shapes, which the c10d op beside it also has).

    fabricbench relate --trace prof/ sweeps.jsonl

training/trace.py reads a call from its c10d op where the profile recorded shapes (record_shapes=True); a
profile without shapes, or a collective issued without a c10d op (NCCL's own coalescing), still has this
event: S from its element counts, following nccl-tests as the c10d rules do (collectives/base.py):
all_gather the gathered output, every other op its input.
"""

from __future__ import annotations

from typing import Any

# "Collective name" -> fabricbench collective (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp's names);
# barriers, waits, point-to-point and set-up are no collective of the fabric's tables
COLLECTIVE_NAMES = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce": "all_reduce",
    "broadcast": "broadcast", "_broadcast_oop": "broadcast",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather": "all_gather",
    "allgather_coalesced": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "reduce": "reduce", "_reduce_oop": "reduce",
}


def op_of(args: dict[str, Any]) -> str | None:
    """The collective a record_param_comms event names; None for a wait, a barrier, a send or none."""
    return COLLECTIVE_NAMES.get(str(args.get("Collective name") or ""))


def _count(args: dict[str, Any], side: str) -> int | None:
    for key in (f"{side} msg nelems", f"{side} msg size"):
        v = args.get(key)
        if isinstance(v, int) and v >= 0:
            return v
    return None


def nbytes(args: dict[str, Any], op: str, elem: int) -> int | None:
    """S in bytes from the event's element counts (module docstring); None where it has none."""
    n = _count(args, "Out" if op == "all_gather" else "In")
    return None if n is None else n * elem


def group_size(args: dict[str, Any]) -> int | None:
    v = args.get("Group size")
    return int(v) if isinstance(v, int) and v > 0 else None
