"""The batch unit: on GPUs without --batch-size, the per-GPU batch that keeps the GPU busy."""

from __future__ import annotations

from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, last_json, model_args
from fabricbench.training.batch import BatchJob


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    return [BatchJob(**model_args(c), gpu=c.gpus[0], **c.shape, precision=c.precision).command()], {}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = last_json(out)
    if rc != 0 or doc is None:
        return failure(children, "batch pick")
    return Outcome(status=Status.OK, records=[{**header("batch", run_id=""), **doc}],
                   message=f"batch {doc.get('chosen')} per GPU ({doc.get('why')})")


KIND = UnitKind(name="batch", description="the per-GPU batch that keeps the GPU busy (doubling, out of memory probed)",
                commands=commands, collect=collect, timeout_s=lambda c: 600.0)
