"""The sweeps a profiler trace needs: exactly its ops, dtypes, sizes and rank count, on the backend and device
it ran on.

    fabricbench sweep --for-trace prof/ --fabric shaped:2gbit --out sweeps.jsonl
    fabricbench sweep --for-trace prof/ --dry-run            (the sweeps it would run)

The plan is the one the relate lab builds from fabricbench's own runs (lab.sweep_plan): per traced dtype
(one a sweep cannot run is swept as the runnable type of its element size), its ops, and sizes in powers
of two by a factor of 4 from the one at or below the smallest traced S up to the first whose size after
the sweep's rounding reaches the largest, at the trace's group size, so that relate interpolates every
traced call. The backend and device are the trace's (gloo or nccl; CPU ranks, or CUDA tensors), unless
the command names them; every other setting (iterations, fabric, timeouts) is the sweep's own.

On a token-bucket fabric (shaped:RATE) each sweep is then run again after an idle gap (`--gap`,
credit.measuring_gap_s): what a call saves after the bucket refilled is the link credit relate takes
(credit.realised_fraction); without it relate can only assume a whole bucket per gap, the upper bound, which
put FSDP 5-10% fast on every shaped rate of a lab run. The project's own labs measure it the same way.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from fabricbench import gpus as gpu_count
from fabricbench.errors import UsageError
from fabricbench.measuring.config import SweepConfig, times_calls_alone
from fabricbench.relating.credit import measuring_gap_s
from fabricbench.relating.lab import sweep_plan
from fabricbench.relating.usertrace import TraceJob, read

SIZE_FACTOR = 4  # the lab's: relate interpolates in log-log between swept sizes this far apart


def configs(paths: Sequence[str | Path], base: SweepConfig, *, backend_named: bool = False,
            gpus_named: bool = False, cpu: bool = False) -> tuple[list[SweepConfig], TraceJob]:
    """One SweepConfig per traced dtype (module docstring), each `base` with the trace's ops, sizes, dtype,
    ranks and (unless named: backend_named, gpus_named; cpu: CPU ranks asked) backend and devices; per
    group size the trace's collectives use, its own sweeps."""
    job = read(paths)
    groups = sorted({int(c["group_size"]) for c in job.collectives})
    out = []
    for n in groups:  # a sweep times one rank count: one set of sweeps per group size the trace uses
        plan = sweep_plan([{"comm": {"collectives": [c for c in job.collectives if c["group_size"] == n]}}],
                          SIZE_FACTOR)
        fields = _devices(job, base, n, backend_named=backend_named, gpus_named=gpus_named, cpu=cpu)
        out += [dataclasses.replace(base, ops=tuple(ops), sizes=sizes, dtype=dtype, **fields)  # type: ignore[arg-type]
                for dtype, ops, sizes in plan]
    if not out:
        raise UsageError(f"trace {job.label}: none of its collectives is one a sweep can time "
                         f"({', '.join(sorted({c['op'] for c in job.collectives}))})")
    return out + gapped(out, base), job


def gapped(plan: list[SweepConfig], base: SweepConfig) -> list[SweepConfig]:
    """The plan's sweeps again after an idle gap, where base's fabric has a token bucket and base asks for
    no gap of its own (module docstring); only sweeps that can time a call alone (the torch engine's
    per-call events: measuring.config.times_calls_alone, SweepConfig's rule for --gap)."""
    gap = measuring_gap_s(base.fabric)
    if gap is None or base.gap_s:
        return []
    return [dataclasses.replace(c, gap_s=gap) for c in plan if times_calls_alone(c)]


def _devices(job: TraceJob, base: SweepConfig, n: int, *, backend_named: bool, gpus_named: bool,
             cpu: bool) -> dict[str, object]:
    """The fields that place n ranks as the trace's ran: its backend, CPU ranks or CUDA tensors."""
    fields: dict[str, object] = {}
    backend = base.backend if backend_named and base.backend else job.backend
    if backend == "gloo":
        fields.update(engine="torch", backend="gloo", nprocs=n)
        if job.device == "cuda" and not gpus_named and not cpu:
            # gloo on CUDA tensors: a GPU per rank where there are enough, else every rank on GPU 0 (the lab)
            visible = gpu_count.visible_gpu_count()
            fields["gpus"] = tuple(range(n)) if visible >= n else (0,)
        return fields
    if job.device != "cuda":
        raise UsageError(f"trace {job.label}: NCCL without a GPU kernel in it; a trace of NCCL collectives "
                         f"holds its kernels (profile with ProfilerActivity.CUDA)")
    if not gpus_named:
        fields["gpus"] = tuple(range(n))
    if base.engine == "torch":
        fields.update(backend="nccl", nprocs=n)
    return fields
