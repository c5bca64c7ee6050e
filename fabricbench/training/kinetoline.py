"""The overlap timeline of a trace read as a stream: training/timeline.py's, measured from the file in a
second pass instead of from a list of every event.

    fabricbench relate --trace prof/ sweeps.jsonl

The first pass (kineto.scan) keeps the step marks and the communication's events, so the steps, the
communication's intervals and which events are compute (timeline.sources: a step thread's `aten::*` op, a
compute kernel) are known before the second; it also keeps each stream's compute kernels as flat pairs of
doubles (16 bytes a kernel). Compute comes from a few sources, each in start order: a thread's ops as the
profiler wrote them (one reader of the file per thread: the step's and autograd's), a stream's kernels
(one at a time on a stream; the profiler writes streams in blocks, so the kernels are kept, not re-read).
Merged by start time (heapq.merge), the compute's union is built stretch by stretch, and each stretch is
measured against the steps as soon as it closes (timeline.Measures): memory holds the readers' windows of
text, a reorder heap and the kernels' pairs, never the host's events. An interval that comes later than
the reorder heap can wait for (REORDER intervals) is still counted, and said.
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any, Callable, Iterator

from fabricbench.training import kineto
from fabricbench.training.timeline import Measures, is_compute, is_nccl_kernel, sources, step_windows, summary

REORDER = 4096  # intervals held back to put a source's stragglers in start order


class Stretches:
    """The union of intervals given in nearly start order, emitted stretch by stretch as each closes."""

    def __init__(self, emit: Callable[[float, float], None]) -> None:
        self.emit = emit
        self.heap: list[tuple[float, float]] = []
        self.cur: list[float] | None = None
        self.late = 0  # intervals that started before a stretch already emitted

    def add(self, a: float, b: float) -> None:
        heapq.heappush(self.heap, (a, b))
        if len(self.heap) > REORDER:
            self._take(*heapq.heappop(self.heap))

    def _take(self, a: float, b: float) -> None:
        cur = self.cur
        if cur is None:
            self.cur = [a, b]
        elif a < cur[0]:  # beyond the reorder window: counted on its own, said (it may overlap one emitted)
            self.late += 1
            if b > cur[0]:
                cur[0] = a
                cur[1] = max(cur[1], b)
            else:
                self.emit(a, b)
        elif a <= cur[1]:
            cur[1] = max(cur[1], b)
        else:
            self.emit(cur[0], cur[1])
            self.cur = [a, b]

    def close(self) -> None:
        while self.heap:
            self._take(*heapq.heappop(self.heap))
        if self.cur is not None:
            self.emit(*self.cur)
            self.cur = None


def _spans(path: str | Path, want: Callable[[dict[str, Any]], bool]) -> Iterator[tuple[float, float]]:
    """(start, end) of the file's `X` events that `want`, in file order."""
    for e in kineto.events(path):
        if e.get("ph") == "X" and want(e):
            ts = float(e["ts"])
            yield ts, ts + float(e.get("dur") or 0.0)


def _run(flat: Any) -> Iterator[tuple[float, float]]:
    """A stream's kernels as (start, end), in start order (a stream runs one kernel at a time)."""
    pairs = ((flat[k], flat[k + 1]) for k in range(0, len(flat), 2))
    if all(flat[k] <= flat[k + 2] for k in range(0, len(flat) - 2, 2)):
        return pairs
    return iter(sorted(pairs))


def measure(scan: kineto.Scan, *, device_type: str) -> tuple[dict[str, Any] | None, int]:
    """(the timeline of the scanned trace, as timeline.timeline gives it for a list of events; how many
    intervals came too late to be put in order)."""
    kept = scan.kept
    windows = step_windows(kept)
    if not windows:
        return None, 0
    src = sources(kept, device_type=device_type)
    m = Measures(windows, src.comm)
    compute, busy = Stretches(m.add_compute), Stretches(m.add_busy)
    streams = [_spans(scan.path, lambda e, t=tid: e.get("tid") == t and kineto.category(e) != "kernel"
                      and is_compute(e, src)) for tid in (src.threads if src.host else ())]
    kernels = [_run(flat) for flat in scan.kernel_runs.values()] if device_type == "cuda" else []
    for a, b in heapq.merge(*streams, *(kernels if src.kernels else [])):
        compute.add(a, b)
    compute.close()
    if device_type == "cuda":  # every kernel: the compute ones and NCCL's (kept whole)
        nccl = sorted((e["ts"], e["ts"] + e["dur"]) for e in kept if e["cat"] == "kernel" and is_nccl_kernel(e))
        for a, b in heapq.merge(nccl, *[_run(flat) for flat in scan.kernel_runs.values()]):
            busy.add(a, b)
        busy.close()
    return summary(m, source=src.name, device_type=device_type), compute.late + busy.late
