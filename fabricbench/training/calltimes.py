"""What each traced collective took, call by call: the ground truth relate compares the sweep's prices with
(fabricbench/relating/calls.py) and the intervals in which collectives ran side by side.

    fabricbench train --strategy fsdp --model lab-mistral --device cpu --nprocs 2 --json   # comm.calls

Each rank's profiled steps give, per collective call (matching.matched), the backend's own interval: the NCCL
kernel on GPU, the gloo worker's `gloo:*` event on gloo (begun when the worker takes the work, ended when
it is done). A rank's interval of a call includes its wait for the last rank to join; the last rank to
join waits for no one, so the shortest interval over the ranks of the same call (`dur_min_s`) is the
collective's own time, and rank 0's intervals (`start_s`, from its step's start, and `dur_s`) show which
calls were in flight together.
"""

from __future__ import annotations

from typing import Any, Sequence

FIELDS = ("step", "op", "bytes", "dtype", "group_size", "start_s", "dur_s")
RULE = ("rank 0's calls in issue order, start_s from its step's start, dur_s its backend interval (NCCL kernel "
        "or gloo worker event); dur_min_s the shortest interval of the same call over the ranks")


def rank_rows(found: Sequence[Any], windows: list[tuple[float, float]]) -> list[list[Any]]:
    """One row per matched call (matching.Matched), FIELDS in order; start and duration None where the
    backend's event of the call was not found. Profile times are microseconds; rows hold seconds."""
    rows = []
    for m in found:
        c, span = m.call, m.span
        start = round((span[0] - windows[m.step][0]) * 1e-6, 9) if span else None
        dur = round((span[1] - span[0]) * 1e-6, 9) if span else None
        rows.append([m.step, c.op, c.bytes, c.dtype, c.group_size, start, dur])
    return rows


def join(ranks: list[list[list[Any]] | None]) -> dict[str, Any] | None:
    """The ranks' rows -> the record's `comm.calls` (FIELDS + dur_min_s); None when a rank has none. A call
    whose row differs between ranks (another op, size or step at that index) gets no dur_min_s."""
    if not ranks or any(r is None for r in ranks):
        return None
    r0 = ranks[0]
    rows = []
    for i, row in enumerate(r0):
        same = [r[i] for r in ranks if i < len(r) and r[i][:5] == row[:5]]
        durs = [r[6] for r in same if r[6] is not None]
        rows.append(list(row) + [min(durs) if len(same) == len(ranks) and len(durs) == len(ranks) else None])
    return {"fields": list(FIELDS) + ["dur_min_s"], "rows": rows, "ranks": len(ranks), "rule": RULE}


def as_dicts(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """comm.calls rows as dicts keyed by its fields ([] where the record has none)."""
    if not isinstance(section, dict):
        return []
    fields = section.get("fields") or []
    return [dict(zip(fields, row)) for row in section.get("rows") or [] if isinstance(row, list)]
