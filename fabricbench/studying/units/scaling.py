"""The scaling unit: busbw inside and across NVLink islands, at the largest size the sweeps run."""

from __future__ import annotations

from fabricbench.jobs.configs import ScalingJob
from fabricbench.results.status import Status
from fabricbench.sizes import SizeSweep, format_size
from fabricbench.studying.sweeps import sweep_plan
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, file_records


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    biggest = largest_size(ctx)
    job = ScalingJob(gpus=tuple(c.gpus), ops="all_reduce", sizes=biggest, fabric=str(unit.fabric), iters=c.iters,
                     warmup=c.warmup, out=str(ctx.unit_file(unit)), as_json=True)
    return [job.command()], {"sizes": biggest}


def largest_size(ctx: Context) -> str:
    """The largest size the study's sweeps run, at most 1 GiB."""
    sizes = [max(SizeSweep.parse(p["sizes"]).expand()) for p in sweep_plan(ctx)]
    return format_size(min(max(sizes), 1 << 30))


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = file_records(ctx.unit_file(unit), kind="collective")
    if not recs:
        return failure(children, "scaling")
    rc = children[-1][0]
    return Outcome(status=Status.OK if rc == 0 else Status.ERROR, records=recs,
                   message=None if rc == 0 else "some GPU sets failed; the others are kept")


KIND = UnitKind(name="scaling", description="busbw inside and across NVLink islands",
                commands=commands, collect=collect, timeout_s=lambda c: c.sweep_timeout_s)
