"""The estimate unit: model-state bytes per GPU per strategy (`fabricbench estimate --json`)."""

from __future__ import annotations

from fabricbench.jobs.configs import EstimateJob
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, batch_of, failure, last_json, model_args


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    job = EstimateJob(**model_args(c), num_gpus=c.world_size, batch_size=batch_of(ctx), **c.shape, as_json=True)
    return [job.command()], {}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = last_json(out)
    if rc != 0 or doc is None:
        return failure(children, "estimate")
    return Outcome(status=Status.OK, records=[{**header("estimate", run_id=""), **doc}])


KIND = UnitKind(name="estimate", description="model-state bytes per GPU per strategy",
                commands=commands, collect=collect, timeout_s=lambda c: 300.0)
