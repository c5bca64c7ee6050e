"""Expanding a SweepConfig into the Cases that will run (what `fabricbench sweep --dry-run` prints).

A size that leaves a rank less than one element, or an in-place run of a collective that has no in-place
form, becomes a *waived* row with its reason rather than an error, as nvbandwidth does.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricbench import dtypes
from fabricbench.collectives import COLLECTIVES
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.session import Case
from fabricbench.sizes import format_size


@dataclass(frozen=True, kw_only=True)
class PlanItem:
    op: str
    dtype: str
    requested_bytes: int
    inplace: bool
    case: Case | None  # None when waived
    waived: str | None = None  # why it does not run


def build_plan(config: SweepConfig, nranks: int, seed: int = 0) -> list[PlanItem]:
    esize = dtypes.elem_size(config.dtype)
    items: list[PlanItem] = []
    for op in config.ops:
        coll = COLLECTIVES.get(op)
        for inplace in config.modes():
            for requested in config.sizes.expand():
                base = dict(op=op, dtype=config.dtype, requested_bytes=requested, inplace=inplace)
                if inplace and not coll.supports_inplace:
                    items.append(PlanItem(**base, case=None, waived=f"{op} has no in-place form"))
                    continue
                sz = coll.size(requested, esize, nranks)
                if sz.nccl_count == 0:
                    items.append(PlanItem(**base, case=None, waived=(
                        f"{format_size(requested)} of {config.dtype} leaves less than one element per rank "
                        f"for {nranks} ranks")))
                    continue
                case = Case(op=op, dtype=config.dtype, requested_bytes=requested, bytes=sz.bytes,
                            count=sz.count, nccl_count=sz.nccl_count, send_bytes=sz.send_bytes,
                            recv_bytes=sz.recv_bytes, inplace=inplace, graph=config.graph,
                            check=config.check, warmup=config.warmup, iters=config.iters,
                            graph_iters=config.graph_iters, seed=seed, buffers=config.buffers,
                            timing=config.timing, alloc=config.alloc, gap_s=config.gap_s)
                items.append(PlanItem(**base, case=case))
    return items


def plan_length(config: SweepConfig) -> int:
    """How many items build_plan makes: one per op, in-place setting and size, waived or not, whatever the
    ranks. What a progress bar counts before the ranks have planned (they build the plan, once)."""
    return len(config.ops) * len(config.modes()) * len(config.sizes.expand())


def bytes_per_gpu(case: Case) -> int:
    """Device memory one rank needs for a Case: its buffers (in-place shares one) and the check's copy."""
    buffers = max(case.send_bytes, case.recv_bytes) if case.inplace else case.send_bytes + case.recv_bytes
    return buffers


def host_available_bytes() -> int | None:
    """The host's MemAvailable (what can be allocated without swapping), or None where /proc says nothing."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(plan: list[PlanItem], free_bytes: int | None, *, host_ranks: int | None = None) -> str | None:
    """A one-line reason when the largest Case does not fit the free memory, naming what does fit.

    GPU ranks pass their device's free bytes. CPU ranks pass host_ranks (the ranks on this host) and
    free_bytes = MemAvailable / host_ranks: they share the host's memory, and a sweep that does not fit
    would swap the machine to a halt or be killed by the OOM killer instead of saying so.
    """
    if free_bytes is None:
        return None
    cases = [p.case for p in plan if p.case is not None]
    if not cases:
        return None
    usable = int(free_bytes * 0.92)  # NCCL's own buffers and the CUDA context need some headroom
    too_big = [c for c in cases if bytes_per_gpu(c) > usable]
    if not too_big:
        return None
    worst = max(too_big, key=bytes_per_gpu)
    fits = [c.requested_bytes for c in cases if bytes_per_gpu(c) <= usable and c.op == worst.op]
    hint = f"sizes up to {format_size(max(fits))} fit" if fits else "no size of this sweep fits"
    mode = "in-place" if worst.inplace else "out-of-place"
    if host_ranks is not None:
        return (f"--sizes up to {format_size(worst.requested_bytes)}: {worst.op} {mode} needs "
                f"{bytes_per_gpu(worst) / 2**30:.1f} GiB per rank x {host_ranks} CPU rank(s) but the host has "
                f"{free_bytes * host_ranks / 2**30:.1f} GiB available (MemAvailable); {hint}: lower --sizes "
                f"or --nprocs")
    return (f"--sizes up to {format_size(worst.requested_bytes)}: {worst.op} {mode} needs "
            f"{bytes_per_gpu(worst) / 2**30:.1f} GiB per GPU but {free_bytes / 2**30:.1f} GiB is free; {hint}")
