"""What a training step really sends: every collective of a few extra profiled steps, and how much of it
overlapped no compute.

    fabricbench train --strategy all --model lab-mistral --device cpu --nprocs 2 --json

After its timed steps each rank (worker.py) runs PROFILED_STEPS more under torch.profiler (record_shapes
on; after warmup_steps() whose events are dropped), never the timed ones, and reduces the profile
to a small per-rank summary (`rank_summary`); the launcher joins the ranks into the record's "comm"
section (`join`).

Collectives. Every outermost `c10d::*` dispatcher op (`_c10d_functional::*` likewise) issued inside a
profiled step is one call, on nccl and gloo alike (torch 2.13: gloo has no `record_param_comms` events,
nccl has both). Its size S follows nccl-tests (fabricbench/collectives/base.py): all_reduce and broadcast
the buffer, all_gather the gathered output, reduce_scatter the input, all_to_all the send buffer. Where
the op's arguments are tensor lists the profiler gives shapes but no dtype; the dtype then comes from the
backend's own event for that call: gloo's `gloo:*` event (run on gloo's worker thread, matched by shape
and order) or nccl's `record_param_comms` nested in the op (which also names the group size). gloo's
events do not name the process group, so there the group size is the world size (functional ops name it
in their arguments); `rank_summary` records the sizes of the groups that exist, and `join` says so when
some group differs.
Calls on a group of one rank move nothing and are not listed (world size 1: "no collective ran").

Timeline: how much of each profiled step's communication overlapped no compute (timeline.py).

Textbook volume: `Strategy.textbook_sends` (fabricbench/training/strategies), in S per step in units
of Ψ·b, b = 2 bytes for bf16/fp16 and 4 for fp32 (the ZeRO paper's accounting): DDP all-reduces Ψ
(wire 2(n-1)/n·Ψ·b per rank); ZeRO-1/2 reduce-scatter Ψ and all-gather Ψ (2(n-1)/n·Ψ·b); ZeRO-3 and FSDP
all-gather 2Ψ and reduce-scatter Ψ (3(n-1)/n·Ψ·b). textbook_ratio = traced S / textbook S; wire_ratio
compares per-rank wire bytes (S × the op's busbw factor), which tells an all-reduce from a
reduce-scatter of the same S.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from fabricbench.collectives import COLLECTIVES
from fabricbench.training import calltimes
from fabricbench.training.matching import Call, matched
from fabricbench.training.timeline import STEP_MARK, step_windows, timeline

PROFILED_STEPS = 2  # default; extra steps after the timed ones

# --- capture (in the worker) -------------------------------------------------------------------------

# Steps run under the profiler before the recorded ones, their events dropped: the first step after the
# profiler starts carries its start-up (CUPTI's buffers, the first records of every op), which made one of
# two profiled steps 1.5-4x the other on the one-GPU H100 relate lab (FSDP's own calls at 3.1x the sweep
# in that step, 0.6x in the next), so the run's own call times had no stable ratio.
# Per device: that start-up is CUPTI's. The host-only profiler's first step costs what the next ones do (the
# 2-core VM, tiny-mistral: 15.8/18.2/18.9 ms, 13.8/16.3/18.6, 15.0/16.3/18.2 for its first three profiled
# steps), so a CPU run spends no step on it (~0.1 s of a 2-rank CPU run's wall).
PROFILER_WARMUP_STEPS = {"cuda": 1, "cpu": 0}


def warmup_steps(device_type: str) -> int:
    """The profiled steps dropped before the recorded ones on this device (PROFILER_WARMUP_STEPS)."""
    return PROFILER_WARMUP_STEPS.get(device_type, 1)


def profiler(device_type: str, steps: int) -> Any:
    """A profiler recording `steps` steps after warmup_steps(device_type) dropped ones; the caller calls its
    .step() after each step (warmup_steps(device_type) + steps in all)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device_type == "cuda" else [])
    return profile(activities=acts, record_shapes=True,
                   schedule=schedule(wait=0, warmup=warmup_steps(device_type), active=steps, repeat=1))


def step_mark() -> Any:
    from torch.profiler import record_function

    return record_function(STEP_MARK)


def group_sizes() -> list[int]:
    """The sizes of every process group that exists in this process (the default one included)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return []
    world = dist.distributed_c10d._world  # the registry new_group() fills; no public listing exists
    return sorted({dist.get_world_size(pg) for pg in world.pg_map})


KEEP_ENV = "FABRICBENCH_KEEP_PROFILE"  # a folder: each rank's chrome trace is kept there (open it in Perfetto)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block that only allocates (a trace's JSON and its summary
    hold no reference cycles). A rank's heap holds torch's hundreds of thousands of objects, and the millions
    a large trace allocates trigger full collections that walk them all: a 20 MB trace parsed in 1.7-2.5 s
    with the collector on and 0.41-0.44 s with it off, torch imported, on the 2-core VM
    (benchmarks/startup/trace_cost.py measures a run's parts)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def export_events(prof: Any, path: Path) -> list[dict[str, Any]]:
    """The profile's chrome-trace events. The export is the one form that keeps tensor-list shapes."""
    prof.export_chrome_trace(str(path))
    try:
        return json.loads(path.read_text())["traceEvents"]
    finally:
        keep = os.environ.get(KEEP_ENV)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(Path(keep) / path.name))
        path.unlink(missing_ok=True)


def per_step(calls_: Iterable[Call], steps: int) -> list[dict[str, Any]]:
    """Calls grouped by (op, bytes, dtype, group size), counted per step; largest volume first."""
    counts = Counter(calls_)
    rows = [{"op": c.op, "bytes": c.bytes, "dtype": c.dtype, "group_size": c.group_size,
             "calls_per_step": n / steps} for c, n in counts.items()]
    return sorted(rows, key=lambda r: (r["op"], -r["bytes"] * r["calls_per_step"], -r["bytes"]))


def rank_summary(events: list[dict[str, Any]], *, device_type: str, world_size: int, steps: int,
                 step_times_s: list[float], groups: list[int], line: dict[str, Any] | None = None) -> dict[str, Any]:
    """What one rank writes to its rank file: its calls per step, timeline and profiled step times. line: the
    timeline already measured where `events` lack the compute (a streamed trace, training/kinetoline.py)."""
    found, problems = matched(events, world_size=world_size)
    return {"collectives": per_step([m.call for m in found], steps), "problems": problems, "profiled_steps": steps,
            "calls": calltimes.rank_rows(found, step_windows(events)),
            "profiled_step_times_s": step_times_s,
            "timeline": line if line is not None else timeline(events, device_type=device_type),
            "group_sizes": groups}


# --- joining the ranks (in the launcher) -------------------------------------------------------------

def element_bytes(precision: str) -> int:
    """b of the textbook volume: the communicated element in the ZeRO paper's accounting."""
    return 4 if precision == "fp32" else 2


def textbook(sends: dict[str, float], *, psi: int, precision: str) -> dict[str, int]:
    """op -> S bytes per step of the textbook strategy."""
    b = element_bytes(precision)
    return {op: int(round(k * psi * b)) for op, k in sends.items()}


def _wire(by_op: dict[str, int], n: int) -> float:
    """Per-rank wire bytes: S × the op's busbw factor (fabricbench/collectives)."""
    return sum(s * COLLECTIVES.get(op).busbw_factor(n) for op, s in by_op.items() if op in COLLECTIVES)


def join(ranks: list[dict[str, Any]], *, backend: str, world_size: int, sends: dict[str, float], psi: int,
         precision: str, timed_step_s: float | None) -> dict[str, Any]:
    """The rank summaries of one run -> the record's "comm" section (INTERFACES.md C)."""
    notes: list[str] = []
    failed = [r for r in ranks if r.get("error")]
    if failed or not ranks:
        why = failed[0]["error"] if failed else "no rank traced"
        return {"source": "none", "backend": backend, "world_size": world_size, "profiled_steps": 0,
                "collectives": [], "bytes_per_step": {}, "total_bytes_per_step": 0,
                "textbook_bytes_per_step": None, "textbook_ratio": None, "timeline": None, "overhead": None,
                "note": f"trace failed: {why}"}
    r0 = ranks[0]
    steps = r0["profiled_steps"]
    listed = [c for c in r0["collectives"] if c["group_size"] > 1]
    trivial = sum(c["calls_per_step"] for c in r0["collectives"] if c["group_size"] <= 1)
    if any(r["collectives"] != r0["collectives"] for r in ranks[1:]):
        notes.append("ranks issued different collectives; rank 0's are listed")
    problems = sorted({p for r in ranks for p in r.get("problems", [])})
    if problems:
        notes.append("not counted: " + "; ".join(problems[:3]))
    if backend == "gloo" and any(g != world_size for g in r0.get("group_sizes", [])):
        notes.append(f"groups of sizes {r0['group_sizes']} exist; gloo's trace does not name the group of a "
                     f"call, so every call is counted on the world ({world_size})")
    by_op: dict[str, int] = {}
    for c in listed:
        by_op[c["op"]] = by_op.get(c["op"], 0) + int(round(c["bytes"] * c["calls_per_step"]))
    total = sum(by_op.values())
    book = textbook(sends, psi=psi, precision=precision)
    book_total = sum(book.values())
    if not listed:
        notes.insert(0, f"world size {world_size}: no collective ran between ranks"
                     + (f" ({trivial:g} call(s) per step on a group of one rank, which move nothing)"
                        if trivial else ""))
    profiled = [max(r["profiled_step_times_s"][i] for r in ranks) for i in range(steps)]
    prof_s = statistics.median(profiled) if profiled else None
    lines = [r["timeline"] for r in ranks if r.get("timeline")]
    tl = None
    if lines and len(lines) == len(ranks):
        tl = {k: statistics.fmean(t[k] for t in lines) for k in ("comm_s", "exposed_s", "compute_s", "step_s")}
        tl["exposed_fraction"] = tl["exposed_s"] / tl["comm_s"] if tl["comm_s"] > 0 else None
        if all("window_s" in t for t in lines):  # relate's overlap window (model.py)
            tl["window_s"] = statistics.fmean(t["window_s"] for t in lines)
        if all("idle_gaps_s" in t for t in lines):  # relate's link credit (relating/credit.py): every rank's gaps
            tl["idle_gaps_s"] = [g for t in lines for g in t["idle_gaps_s"]]
            tl["idle_gap_steps"] = sum(t["idle_gap_steps"] for t in lines)  # ranks x profiled steps
        if all("busy_s" in t for t in lines):  # the fraction of the step some kernel ran, mean over ranks
            tl["busy_s"] = statistics.fmean(t["busy_s"] for t in lines)
            tl["busy_fraction"] = statistics.fmean(t["busy_s"] / t["step_s"] for t in lines if t["step_s"] > 0) \
                if any(t["step_s"] > 0 for t in lines) else None
        tl.update(source=lines[0]["source"], rule="mean over ranks of the per-step mean")
    return {
        "source": "profiler" if listed else "none", "backend": backend, "world_size": world_size,
        "profiled_steps": steps, "collectives": listed, "bytes_per_step": by_op, "total_bytes_per_step": total,
        "textbook_bytes_per_step": book_total if world_size > 1 else 0,
        "textbook_ratio": total / book_total if world_size > 1 and book_total else None,
        "textbook_by_op": book if world_size > 1 else {},
        "wire_ratio": (_wire(by_op, world_size) / _wire(book, world_size)) if world_size > 1 and book else None,
        "timeline": tl,
        "calls": calltimes.join([r.get("calls") for r in ranks]) if listed else None,  # per call: calltimes.py
        "overhead": {"profiled_step_s": prof_s, "timed_step_s": timed_step_s,
                     "ratio": prof_s / timed_step_s if prof_s and timed_step_s else None},
        "note": "; ".join(notes) or None,
    }

