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

Checked on a synthetic step with known overlap (tests/lab/test_timeline.py): two gloo ranks in one process,
rank 0 computing for C while its all-reduce waits D for rank 1: e = wait / D within 0.1.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Sources:
    """Which events of a profile count, by what ran (the module docstring): the communication's intervals,
    the threads whose `aten::*` ops are compute, whether the compute kernels count too, and the name."""

    comm: list[tuple[float, float]]  # the union of the communication intervals
    threads: frozenset[Any]  # the step's threads (its own, autograd's), never a gloo worker's
    kernels: bool  # compute kernels (every kernel but NCCL's) are compute too
    host: bool  # the threads' aten ops are compute
    name: str


def is_nccl_kernel(e: dict[str, Any]) -> bool:
    return "nccl" in str(e.get("name", "")).lower()


def sources(events: list[dict[str, Any]], *, device_type: str) -> Sources:
    """The Sources of a profile's events (the step marks, gloo's and NCCL's events, autograd's marks: all a
    streamed trace keeps of it, training/kineto.py)."""
    gloo = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]
    workers = {e.get("tid") for e in gloo}
    steps = {e.get("tid") for e in events if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
             and (e.get("name") == STEP_MARK or str(e.get("name", "")).startswith(AUTOGRAD_MARK))}
    threads = frozenset(steps - workers)
    if device_type != "cuda":
        return Sources(_union(_span(e) for e in gloo), threads, False, True, "cpu threads")
    nccl = [_span(e) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X" and is_nccl_kernel(e)]
    if not gloo:
        return Sources(_union(nccl), threads, True, False, NCCL_SOURCE)
    return Sources(_union(nccl + [_span(e) for e in gloo]), threads, True, True, "gloo threads, cuda kernels")


def is_compute(e: dict[str, Any], src: Sources) -> bool:
    """Whether an `X` event is compute under src: a step thread's aten op, or a compute kernel."""
    if e.get("cat") == "kernel":
        return src.kernels and not is_nccl_kernel(e)
    return src.host and e.get("tid") in src.threads and str(e.get("name", "")).startswith("aten::")


def intervals(events: list[dict[str, Any]], *, device_type: str) -> tuple[list, list, list, str]:
    """(comm, compute, busy, source): the unions the module docstring names for what ran."""
    src = sources(events, device_type=device_type)
    xs = [e for e in events if e.get("ph") == "X"]
    busy = _union(_span(e) for e in xs if e.get("cat") == "kernel") if device_type == "cuda" else []
    return src.comm, _union(_span(e) for e in xs if is_compute(e, src)), busy, src.name


class Measures:
    """Per step window, what the compute covers: all of it in the step, of the communication, and of the
    stretch from the first collective's start to the last one's (the overlap window); and what any kernel
    covers (busy). Fed stretches of the compute's and of the kernels' unions (disjoint; any order)."""

    def __init__(self, windows: list[tuple[float, float]], comm: list[tuple[float, float]]) -> None:
        self.windows = windows
        self.comm = [_clip(comm, lo, hi) for lo, hi in windows]
        self.compute = [0.0] * len(windows)
        self.in_comm = [0.0] * len(windows)
        self.in_window = [0.0] * len(windows)
        self.busy = [0.0] * len(windows)

    def _steps(self, a: float, b: float) -> range:
        lo = bisect.bisect_right(self.windows, (a, float("inf"))) - 1
        hi = bisect.bisect_left(self.windows, (b, float("-inf")))
        return range(max(lo, 0), min(hi, len(self.windows)))

    def add_compute(self, a: float, b: float) -> None:
        for i in self._steps(a, b):
            lo, hi = self.windows[i]
            x, y = max(a, lo), min(b, hi)
            if y <= x:
                continue
            c = self.comm[i]
            self.compute[i] += y - x
            self.in_comm[i] += _length(_clip(c, x, y))
            if c:
                self.in_window[i] += max(0.0, min(y, c[-1][0]) - max(x, c[0][0]))

    def add_busy(self, a: float, b: float) -> None:
        for i in self._steps(a, b):
            lo, hi = self.windows[i]
            self.busy[i] += max(0.0, min(b, hi) - max(a, lo))


def timeline(events: list[dict[str, Any]], *, device_type: str) -> dict[str, Any] | None:
    """Per profiled step (mean): comm_s, exposed_s, compute_s, step_s, window_s, the idle gaps (see the
    module docstring); busy_s on GPU."""
    windows = step_windows(events)
    if not windows:
        return None
    comm, compute, busy, source = intervals(events, device_type=device_type)
    m = Measures(windows, comm)
    for a, b in compute:
        m.add_compute(a, b)
    for a, b in busy:
        m.add_busy(a, b)
    return summary(m, source=source, device_type=device_type)


def summary(m: Measures, *, source: str, device_type: str) -> dict[str, Any]:
    """The timeline of measured steps (timeline(), or a streamed trace's: training/kinetoline.py)."""
    rows, gaps = [], []
    for i, (lo, hi) in enumerate(m.windows):
        c = m.comm[i]
        gaps.extend(idle_gaps(c, lo, hi))
        # the overlap window: compute between the first collective's start and the last one's start (the
        # last is issued when backward ends), which a slower fabric's communication could hide behind
        rows.append((_length(c), _length(c) - m.in_comm[i], m.compute[i], hi - lo, m.busy[i], m.in_window[i]))
    mean = [statistics.fmean(col) * 1e-6 for col in zip(*rows)]  # trace times are microseconds
    out = {"comm_s": mean[0], "exposed_s": mean[1], "compute_s": mean[2], "step_s": mean[3], "source": source,
           "window_s": mean[5], "idle_gaps_s": [round(g * 1e-6, 9) for g in gaps], "idle_gap_steps": len(rows)}
    if device_type == "cuda":  # any kernel running: what the GPU-busy fraction counts (launch.py)
        out["busy_s"] = mean[4]
    return out
