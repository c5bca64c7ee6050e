"""A train run's traced communication as a per-step list a simulator can replay (fabricbench comm trace JSON).

    fabricbench train ddp --model tiny-mistral --device cpu --nprocs 2 --out train.jsonl
    fabricbench export train.jsonl --format comm-trace --out trace.json

Format (schema "fabricbench-comm-trace/1"): {"schema", "source": {file, run_id, host}, "runs": [{"strategy",
"model", "world_size", "precision", "step_time_s" (the run's median), "steps": [{"step": 0, "collectives":
[{"op", "bytes", "group_size", "dtype", "calls"}]}]}]}. `bytes` is S, nccl-tests' convention (docs/domain.md:
all-gather the gathered output, reduce-scatter the input); `calls` how many such calls one step issues. The
trace (training/trace.py) is one profiled step per rank, averaged: the list describes one representative
step, not an ordered replay of every step; `calls` may be fractional where steps differ (say, a first-step
broadcast), kept as measured.

Chakra (MLCommons' execution trace) was considered: no maintained Python package of it is published on PyPI
(the name `chakra` there is an unrelated 2019 package), so this plain JSON is written instead.
"""

from __future__ import annotations

from typing import Any

from fabricbench.errors import UsageError

SCHEMA = "fabricbench-comm-trace/1"


def trace(records: list[dict[str, Any]], *, source: str) -> dict[str, Any]:
    runs = []
    for r in records:
        if r.get("kind") != "train":
            continue
        colls = ((r.get("comm") or {}).get("collectives")) or []
        if not colls:
            continue
        step = [{"op": c.get("op"), "bytes": c.get("bytes"), "group_size": c.get("group_size"),
                 "dtype": c.get("dtype"), "calls": c.get("calls_per_step")} for c in colls]
        runs.append({"strategy": r.get("strategy"), "model": r.get("model"), "world_size": r.get("world_size"),
                     "precision": r.get("precision"), "fabric": r.get("fabric"),
                     "step_time_s": (r.get("step_time") or {}).get("median_s"),
                     "steps": [{"step": 0, "collectives": step}]})
    if not runs:
        raise UsageError(f"{source}: no train record with a communication trace (comm.collectives); run "
                         f"`fabricbench train` with its trace on")
    first = next(r for r in records if r.get("kind") == "train")
    return {"schema": SCHEMA, "source": {"file": source, "run_id": first.get("run_id"), "host": first.get("host")},
            "runs": runs}
