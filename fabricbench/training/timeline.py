"""How much of a profiled step's communication overlapped no compute: the exposed fraction e that relate's
step model uses (fabricbench/relating/model.py), measured per rank from the profiler's events.

    fabricbench train --strategy ddp --model lab-mistral --device cpu --nprocs 2 --json   # comm.timeline

Each profiled step's window is a `fabricbench:step` annotation on the thread that runs the step (the device
is synchronised at both ends, so the step's kernels lie inside it). Per step: comm = the union of the
communication intervals, compute = the union of the compute intervals, exposed = comm minus compute (the
communication that overlapped no compute), e = exposed / comm. Which intervals count, by what ran:

- NCCL on GPU ("cuda kernels"): comm = NCCL kernels, compute = every other kernel.
- gloo on CPU ("cpu threads"): gloo runs each collective on one of its worker threads (ProcessGroupGloo's
  `gloo:*` record-function events, begun when the worker takes the work and ended when it is done, host
  clock), so comm = those intervals; compute = the `aten::*` ops of the step's threads: the one that runs
  the step and the autograd engine's (backward runs there on GPU; on CPU it is the same thread), never a
  gloo worker's own copies.
- gloo on GPU ("gloo threads, cuda kernels"; the one-GPU lab, N ranks with CUDA tensors on one GPU): no
  NCCL kernel exists and the transfer runs on the host (copy to pinned memory, gloo, copy back), so comm =
  the `gloo:*` intervals as on CPU, and compute = the union of the compute kernels and the step threads'
  `aten::*` ops: on a host-bound step (the lab's GPU is busy a few % of the step) the critical path is the
  host launching kernels, and communication that runs meanwhile is hidden behind it. A gloo interval on
  CUDA tensors begins by waiting for the copy of kernels' results still queued on the GPU: that wait
  overlaps those kernels and counts as hidden, as it should.

All count the time a collective waits for a late peer as communication, as NCCL's kernels do. On a
machine with fewer cores than ranks × threads the comm thread competes with compute for a core; the figure
is what the timeline shows, not a measure of the wire alone. On GPU busy_s is the union of every kernel:
busy_fraction = busy_s / step_s is the record's gpu_busy_fraction (below 0.5 the step is host-bound: it
measures the host's launch rate, and hides a fabric's effect).

Checked on a synthetic step with known overlap (tests/test_timeline.py): two gloo ranks in one process,
rank 0 computing for C while its all-reduce waits D for rank 1: e = wait / D within 0.1.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable

STEP_MARK = "fabricbench:step"
NCCL_SOURCE = "cuda kernels"  # the source where NCCL kernels carry the communication (relating/window.py)
AUTOGRAD_MARK = "autograd::engine::evaluate_function"  # events of the thread that runs backward


def step_windows(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("name") == STEP_MARK and e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation")


def _span(e: dict[str, Any]) -> tuple[float, float]:
    return e["ts"], e["ts"] + e["dur"]


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi]


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the union `a` not covered by the union `b` (both sorted, disjoint)."""
    return _length(a) - sum(_length(_clip(b, x, y)) for x, y in a)


def idle_gaps(comm: list[tuple[float, float]], lo: float, hi: float) -> list[float]:
    """The link's idle time before each busy stretch of one step (comm: the step's sorted, disjoint
    communication intervals, clipped to [lo, hi]): between one stretch's end and the next one's start, and
    for the first, the step's tail after its last stretch plus its head before the first (steady steps:
    the previous step's tail is this one's). relate's link credit (relating/credit.py) prices a
    token-bucket link's refill from these."""
    if not comm:
        return []
    first = (comm[0][0] - lo) + (hi - comm[-1][1])
    return [first] + [b[0] - a[1] for a, b in zip(comm, comm[1:])]


def _host_compute(events: list[dict[str, Any]], gloo: list[dict[str, Any]],
                  host: dict[Any, list[tuple[float, float]]] | None = None) -> list[tuple[float, float]]:
    """The `aten::*` ops of the step's threads (the step's own, autograd's), never a gloo worker's; `host`:
    those ops already as a union per thread (a streamed trace keeps no op, training/kineto.py)."""
    workers = {e.get("tid") for e in gloo}
    steps = {e.get("tid") for e in events if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
             and (e.get("name") == STEP_MARK or str(e.get("name", "")).startswith(AUTOGRAD_MARK))}
    if host is not None:
        return _union(s for tid in steps - workers for s in host.get(tid, ()))
    return _union(_span(e) for e in events if e.get("ph") == "X" and e.get("tid") in steps - workers
                  and str(e.get("name", "")).startswith("aten::"))


Spans = list[tuple[float, float]]


def intervals(events: list[dict[str, Any]], *, device_type: str,
              host: dict[Any, Spans] | None = None,
              kernels: tuple[Spans, Spans, Spans] | None = None) -> tuple[list, list, list, str]:
    """(comm, compute, busy, source): the unions the module docstring names for what ran. A streamed trace
    (training/kineto.py) gives what it keeps of the rest as unions: `host` per thread its aten ops, `kernels`
    the (NCCL, compute, every) kernels; None: read from `events`."""
    gloo = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]
    if device_type != "cuda":
        return _union(_span(e) for e in gloo), _host_compute(events, gloo, host), [], "cpu threads"
    if kernels is None:
        ks = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
        is_comm = [("nccl" in e["name"].lower()) for e in ks]
        kernels = ([_span(e) for e, c in zip(ks, is_comm) if c], [_span(e) for e, c in zip(ks, is_comm) if not c],
                   _union(_span(e) for e in ks))
    comm, compute, busy = list(kernels[0]), list(kernels[1]), kernels[2]
    if not gloo:
        return _union(comm), _union(compute), busy, NCCL_SOURCE
    comm += [_span(e) for e in gloo]
    compute += _host_compute(events, gloo, host)
    return _union(comm), _union(compute), busy, "gloo threads, cuda kernels"


def timeline(events: list[dict[str, Any]], *, device_type: str, host: dict[Any, Spans] | None = None,
             kernels: tuple[Spans, Spans, Spans] | None = None) -> dict[str, Any] | None:
    """Per profiled step (mean): comm_s, exposed_s, compute_s, step_s, window_s, the idle gaps (see the
    module docstring); busy_s on GPU. host, kernels: as intervals() takes them."""
    windows = step_windows(events)
    if not windows:
        return None
    comm, compute, busy, source = intervals(events, device_type=device_type, host=host, kernels=kernels)
    rows, gaps = [], []
    for lo, hi in windows:
        c, k = _clip(comm, lo, hi), _clip(compute, lo, hi)
        gaps.extend(idle_gaps(c, lo, hi))
        # the overlap window: compute between the first collective's start and the last one's start (the
        # last is issued when backward ends), which a slower fabric's communication could hide behind
        win = _length(_clip(k, c[0][0], c[-1][0])) if c else 0.0
        rows.append((_length(c), _minus(c, k), _length(k), hi - lo, _length(_clip(busy, lo, hi)), win))
    mean = [statistics.fmean(col) * 1e-6 for col in zip(*rows)]  # trace times are microseconds
    out = {"comm_s": mean[0], "exposed_s": mean[1], "compute_s": mean[2], "step_s": mean[3], "source": source,
           "window_s": mean[5], "idle_gaps_s": [round(g * 1e-6, 9) for g in gaps], "idle_gap_steps": len(rows)}
    if device_type == "cuda":  # any kernel running: what the GPU-busy fraction counts (launch.py)
        out["busy_s"] = mean[4]
    return out
