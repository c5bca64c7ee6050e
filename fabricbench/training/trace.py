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

import bisect
import json
import os
import shutil
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fabricbench.collectives import COLLECTIVES
from fabricbench.training import calltimes, paramcomms
from fabricbench.training.timeline import STEP_MARK, step_windows, timeline

PROFILED_STEPS = 2  # default; extra steps after the timed ones

# profiler "Input type" -> fabricbench dtype name (fabricbench/dtypes.py, plus int64/bool)
DTYPE_NAMES = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16", "double": "float64",
               "int": "int32", "long int": "int64", "long": "int64", "signed char": "int8", "unsigned char": "uint8",
               "bool": "bool", "Float": "float32", "BFloat16": "bfloat16", "Half": "float16",
               "Double": "float64", "Int": "int32", "Long": "int64", "Char": "int8", "Byte": "uint8",
               "Bool": "bool"}
ELEM_SIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1,
             "uint8": 1, "bool": 1}


@dataclass(frozen=True)
class OpRule:
    """How one dispatcher op maps to a fabricbench collective and which argument sizes S."""

    op: str  # a COLLECTIVES key (or a name outside it, kept as is)
    arg: int  # index of the argument whose tensors make S
    times_n: bool = False  # S = that argument's bytes × group size (per-rank part given)
    group_arg: int | None = None  # the argument that names the group size (functional ops), if any
    part_arg: int | None = None  # the argument holding one rank's part: group size = S's elements / its


# c10d dispatcher ops (torch/csrc/distributed/c10d/Ops.cpp) and their functional twins
OP_RULES: dict[str, OpRule] = {
    "c10d::allreduce_": OpRule("all_reduce", 0),
    "c10d::allreduce_coalesced_": OpRule("all_reduce", 0),
    "c10d::broadcast_": OpRule("broadcast", 0),
    "c10d::_allgather_base_": OpRule("all_gather", 0, part_arg=1),
    "c10d::allgather_": OpRule("all_gather", 1, times_n=True),
    "c10d::allgather_coalesced_": OpRule("all_gather", 1, times_n=True),
    "c10d::allgather_into_tensor_coalesced_": OpRule("all_gather", 0),
    "c10d::_reduce_scatter_base_": OpRule("reduce_scatter", 1, part_arg=0),
    "c10d::reduce_scatter_": OpRule("reduce_scatter", 0, times_n=True),
    "c10d::reduce_scatter_tensor_coalesced_": OpRule("reduce_scatter", 1),
    "c10d::alltoall_base_": OpRule("all_to_all", 1),
    "c10d::alltoall_": OpRule("all_to_all", 1),
    "c10d::reduce_": OpRule("reduce", 0),
    "_c10d_functional::all_reduce": OpRule("all_reduce", 0),
    "_c10d_functional::all_reduce_": OpRule("all_reduce", 0),
    "_c10d_functional::all_reduce_coalesced": OpRule("all_reduce", 0),
    "_c10d_functional::all_gather_into_tensor": OpRule("all_gather", 0, times_n=True, group_arg=1),
    "_c10d_functional::all_gather_into_tensor_coalesced": OpRule("all_gather", 0, times_n=True, group_arg=1),
    "_c10d_functional::reduce_scatter_tensor": OpRule("reduce_scatter", 0, group_arg=2),
    "_c10d_functional::reduce_scatter_tensor_coalesced": OpRule("reduce_scatter", 0, group_arg=2),
    "_c10d_functional::broadcast": OpRule("broadcast", 0),
    "_c10d_functional::all_to_all_single": OpRule("all_to_all", 0),
}  # not counted: barriers and point-to-point (send/recv), which are no collective of the fabric's tables


# --- capture (in the worker) -------------------------------------------------------------------------

# Steps run under the profiler before the recorded ones, their events dropped: the first step after the
# profiler starts carries its start-up (CUPTI's buffers, the first records of every op), which made one of
# two profiled steps 1.5-4x the other on the H100 lab (benchmarks/results/h100-1gpu/relate-lab: FSDP's own
# calls at 3.1x the sweep in that step, 0.6x in the next), so the run's own call times had no stable ratio.
# Per device: that start-up is CUPTI's. The host-only profiler's first step costs what the next ones do (the
# 2-core VM, tiny-mistral: 15.8/18.2/18.9 ms, 13.8/16.3/18.6, 15.0/16.3/18.2 for its first three profiled
# steps), so a CPU run spends no step on it (~0.1 s of a 2-rank CPU run's wall, issue 38).
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


# --- reading a profile -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    op: str
    bytes: int
    dtype: str
    group_size: int


def _nbytes(dims: Any, elem: int) -> int:
    """Bytes of a shape, a list of shapes or a list of lists of shapes."""
    if not isinstance(dims, list):
        return 0
    if all(isinstance(d, int) for d in dims):  # one tensor's shape ([] is a scalar: one element)
        n = 1
        for d in dims:
            n *= d
        return n * elem
    return sum(_nbytes(d, elem) for d in dims)


def _first_shape(dims: Any) -> list[int] | None:
    if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
        return dims
    for d in dims if isinstance(dims, list) else []:
        s = _first_shape(d)
        if s is not None:
            return s
    return None


def _dtype(type_name: Any) -> str | None:
    return DTYPE_NAMES.get(type_name) if isinstance(type_name, str) else None


def _contains(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer.get("dur", 0)


def _is_cpu_op(e: dict[str, Any]) -> bool:
    return e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", None)


# the second word of an NCCL kernel's name (ncclDevKernel_AllReduce_Sum_bf16, ncclKernel_AllGather_RING_LL_...)
# per op; NCCL's "Generic" kernels name no op and are matched by order alone
NCCL_KERNEL = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
               "broadcast": "broadcast", "reduce": "reduce", "all_to_all": "sendrecv"}


def calls(events: list[dict[str, Any]], *, world_size: int) -> tuple[list[Call], list[str]]:
    """Every collective call inside the step windows -> (calls, problems)."""
    found, problems = matched(events, world_size=world_size)
    return [m.call for m in found], problems


@dataclass(frozen=True)
class Matched:
    """One call and what the backend's own events say of it: its step and its interval (us), the NCCL
    kernel's on GPU, the gloo worker's event on gloo (None where no such event was found)."""

    call: Call
    step: int
    span: tuple[float, float] | None


class Timed:
    """Events in start order, with the first at or after a time found by bisection (a long trace has
    thousands of calls: a scan from the start per call is quadratic)."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        self.events = sorted(events, key=lambda e: e["ts"])
        self.starts = [e["ts"] for e in self.events]

    def since(self, ts: float) -> range:
        return range(bisect.bisect_left(self.starts, ts), len(self.events))

    def within(self, outer: dict[str, Any]) -> list[dict[str, Any]]:
        """The events that lie inside `outer` on its thread."""
        hi = bisect.bisect_right(self.starts, outer["ts"] + outer.get("dur", 0))
        return [e for e in self.events[bisect.bisect_left(self.starts, outer["ts"]):hi]
                if e.get("tid") == outer.get("tid") and _contains(outer, e)]


def _gloo_event(e: dict[str, Any], gloo: Timed, used: set[int]) -> dict[str, Any] | None:
    """The first unused gloo worker event at or after op e whose first shape is one of e's arguments'
    (all-gather's is its per-rank input, reduce-scatter's the full input it all-reduces)."""
    shapes = [s for d in e.get("args", {}).get("Input Dims") or [] if (s := _first_shape(d)) is not None]
    for i in gloo.since(e["ts"]):
        g = gloo.events[i]
        if i not in used and (not shapes or _first_shape(g.get("args", {}).get("Input Dims") or []) in shapes):
            used.add(i)
            return g
    return None


def _nccl_kernel(e: dict[str, Any], op: str, kernels: Timed, used: set[int]) -> dict[str, Any] | None:
    """The first unused NCCL kernel of op's kind launched at or after op e (kernels in launch order)."""
    want = NCCL_KERNEL.get(op)
    for i in kernels.since(e["ts"]):
        words = str(kernels.events[i]["name"]).lower().split("_")
        kind = words[1] if len(words) > 1 else ""
        if i not in used and (kind == want or kind.startswith("generic")):
            used.add(i)
            return kernels.events[i]
    return None


def _outermost(coll: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ops (in start order) that no other op on their thread strictly contains: on one thread ops nest
    or follow one another, so the last outermost op of the thread is the only one that can contain the next."""
    last: dict[Any, dict[str, Any]] = {}
    out = []
    for e in coll:
        o = last.get(e.get("tid"))
        if o is not None and _contains(o, e) and not _contains(e, o):
            continue
        last[e.get("tid")] = e
        out.append(e)
    return out


def matched(events: list[dict[str, Any]], *, world_size: int) -> tuple[list[Matched], list[str]]:
    """Every collective call inside the step windows, with its backend interval -> (calls, problems)."""
    windows = step_windows(events)
    inside = [e for e in events if _is_cpu_op(e) and _step_of(windows, e["ts"]) is not None]
    coll = sorted((e for e in inside if e["name"] in OP_RULES), key=lambda e: e["ts"])
    # outermost only: a coalesced or functional op may dispatch to another c10d op on the same thread
    outer = _outermost(coll)
    params = Timed(e for e in inside if e["name"] == "record_param_comms")
    hosts = Timed(e for e in inside if str(e["name"]).startswith("nccl:"))
    gloo = Timed(e for e in inside if e["name"].startswith("gloo:"))
    kernels = Timed(e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"
                    and "nccl" in str(e.get("name", "")).lower())
    used: set[int] = set()
    used_k: set[int] = set()
    out, problems = [], []
    nccl = bool(kernels.events) and not gloo.events  # NCCL's kernels ran (gloo on CUDA tensors launches none)
    for e in outer:
        rule = OP_RULES[e["name"]]
        args = e.get("args", {})
        dims, types = args.get("Input Dims") or [], args.get("Input type") or []
        arg_dims = dims[rule.arg] if rule.arg < len(dims) else None
        dtype = _dtype(types[rule.arg]) if rule.arg < len(types) else None
        if arg_dims == [] and rule.arg < len(types) and types[rule.arg] in LISTS:
            arg_dims = None  # a tensor list the profiler gave no shapes for (not a scalar)
        if arg_dims is None:  # the backend's own host event (nccl:*, older PyTorch) may name the tensor
            arg_dims, dtype = _host_tensor(hosts.within(e)) or (None, dtype)
        group = world_size
        concrete = args.get("Concrete Inputs") or []
        if rule.group_arg is not None and rule.group_arg < len(concrete) and str(concrete[rule.group_arg]).isdigit():
            group = int(concrete[rule.group_arg])
        elif rule.part_arg is not None and (n := _parts(arg_dims, dims[rule.part_arg] if rule.part_arg < len(dims)
                                                         else None)):
            group = n  # the whole over one rank's part: a subgroup's size where the events name none
        nested = [p for p in params.within(e) if paramcomms.op_of(p.get("args", {}))]
        backend, counted = None, None
        if nested:  # nccl: the backend's own account of this call
            pa = nested[0]["args"]
            dtype = dtype or _dtype(pa.get("dtype"))
            group = paramcomms.group_size(pa) or world_size
            if arg_dims is None and dtype in ELEM_SIZE:  # profiled without shapes: its element counts
                counted = paramcomms.nbytes(pa, rule.op, ELEM_SIZE[dtype])
        if nested or nccl:
            backend = _nccl_kernel(e, rule.op, kernels, used_k)
        else:  # gloo: the worker-thread event of this call, by shape and order (it names a list's dtype)
            backend = _gloo_event(e, gloo, used)
            if dtype is None and backend is not None:
                dtype = _dtype((backend.get("args", {}).get("Input type") or [None])[0])
        if dtype is None or dtype not in ELEM_SIZE or (arg_dims is None and counted is None):
            problems.append(f"{e['name']}: no dtype or shape in the profile (types {types}, dims {dims}); "
                            f"profile with record_shapes=True")
            continue
        nbytes = counted if counted is not None else _nbytes(arg_dims, ELEM_SIZE[dtype]) * (group if rule.times_n else 1)
        out.append((e["ts"], Matched(Call(op=rule.op, bytes=nbytes, dtype=dtype, group_size=group),
                                     _step_of(windows, e["ts"]) or 0, _span(backend) if backend is not None else None)))
    out += _unwrapped(params, outer, windows, kernels, used_k, world_size)
    return [m for _, m in sorted(out, key=lambda t: t[0])], problems


def _parts(whole: Any, part: Any) -> int | None:
    """How many `part`s make `whole` (two shapes); None where either is not one tensor's shape."""
    if not (isinstance(whole, list) and isinstance(part, list) and whole and part
            and all(isinstance(d, int) for d in whole + part)):
        return None
    w, p = _nbytes(whole, 1), _nbytes(part, 1)
    return w // p if p > 0 and w % p == 0 and w >= p else None


LISTS = ("TensorList", "GenericList")  # profiler "Input type"s of a list argument


def _host_tensor(hosts: list[dict[str, Any]]) -> tuple[Any, str] | None:
    """(dims, dtype) of the first tensor of an op's `nccl:*` events (its input: for an all-gather the
    per-rank part, which its rule multiplies by the group size)."""
    for h in hosts:
        a = h.get("args", {})
        dims, types = a.get("Input Dims") or [], a.get("Input type") or []
        dtype = _dtype(types[0]) if types else None
        if dims and isinstance(dims[0], list) and dims[0] and dtype:
            return dims[0], dtype
    return None


def _step_of(windows: list[tuple[float, float]], ts: float) -> int | None:
    """The index of the step window that holds ts (windows sorted, apart); None outside them all."""
    i = bisect.bisect_right(windows, (ts, float("inf"))) - 1
    return i if i >= 0 and windows[i][0] <= ts <= windows[i][1] else None


def _unwrapped(params: Timed, outer: list[dict[str, Any]], windows: list[tuple[float, float]],
               kernels: Timed, used_k: set[int], world_size: int) -> list[tuple[float, Matched]]:
    """NCCL's own events of collectives issued without a c10d op around them (paramcomms.py)."""
    wrapped = {id(p) for o in outer for p in params.within(o)}
    out = []
    for p in params.events:
        pa = p.get("args", {})
        op = paramcomms.op_of(pa)
        dtype = _dtype(pa.get("dtype"))
        if op is None or dtype not in ELEM_SIZE or id(p) in wrapped:
            continue
        nbytes = paramcomms.nbytes(pa, op, ELEM_SIZE[dtype])
        step = _step_of(windows, p["ts"])
        if nbytes is None or step is None:
            continue
        kernel = _nccl_kernel(p, op, kernels, used_k)
        call = Call(op=op, bytes=nbytes, dtype=dtype, group_size=paramcomms.group_size(pa) or world_size)
        out.append((p["ts"], Matched(call, step, _span(kernel) if kernel is not None else None)))
    return out


def _span(e: dict[str, Any]) -> tuple[float, float]:
    return float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))


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

