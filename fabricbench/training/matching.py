"""Which collective each profiled op is, and its size, dtype, group size and interval: the reading of a
torch.profiler profile that fabricbench's own runs (training/trace.py) and a user's trace
(relating/usertrace.py) share. The rules are trace.py's module docstring's.

    fabricbench train --strategy ddp --model lab-mistral --device cpu --nprocs 2 --json   # comm.collectives
    fabricbench relate --trace prof/ sweeps.jsonl
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable

from fabricbench.training import paramcomms
from fabricbench.training.timeline import step_windows

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


# microseconds: the profiler writes times to the nanosecond, and start + duration of two events that end
# together may differ by that after rounding (a trace's times are ~1e12 us: a double holds ~0.5 ns there)
EPS_US = 0.002


def _contains(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    return (outer["ts"] - EPS_US <= inner["ts"]
            and inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer.get("dur", 0) + EPS_US)


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
        hi = bisect.bisect_right(self.starts, outer["ts"] + outer.get("dur", 0) + EPS_US)
        return [e for e in self.events[bisect.bisect_left(self.starts, outer["ts"] - EPS_US):hi]
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
