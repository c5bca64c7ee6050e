"""The relate unit: predicted against observed slowdown per fabric (`fabricbench relate --json`)."""

from __future__ import annotations

import os

from fabricbench.jobs.configs import RelateJob
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, last_json


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    if c.world_size < 2:  # nothing was communicated: there is no slowdown to explain
        return [], {"waived": f"{c.world_size} rank: no collective ran, so there is nothing to relate"}
    if len(c.fabrics) < 2:
        return [], {"waived": "one fabric: relate explains the slowdown between fabrics; name two with --fabrics"}
    files = sorted(str(p) for p in (ctx.out_dir / "units").glob("*.jsonl")
                   if p.name.startswith(("sweep", "train")))
    ref = ctx.config.fabric_names[0]
    job = RelateJob(files=tuple(files), reference=ref, as_json=True)
    return [job.command()], {"inputs": [os.path.basename(f) for f in files]}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = last_json(out)
    if doc is None:
        return failure(children, "relate")
    return Outcome(status=Status.OK if rc == 0 else Status.ERROR, records=[{**header("relate", run_id=""), **doc}],
                   message=None if rc == 0 else f"relate exit {rc}")


KIND = UnitKind(name="relate", description="predicted against observed slowdown per fabric",
                commands=commands, collect=collect, timeout_s=lambda c: 300.0, derived=True)
