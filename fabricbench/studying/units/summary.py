"""The summary unit: comparisons with verdicts, rankings from them, slowdowns, host-bound notes
(`fabricbench report DIR --json`)."""

from __future__ import annotations

from fabricbench.jobs.configs import ReportJob
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, last_json


def commands(unit: Unit, ctx: Context):
    return [ReportJob(out_dir=str(ctx.out_dir), as_json=True).command()], {}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = last_json(out)
    if rc != 0 or doc is None:
        return failure(children, "summary")
    return Outcome(status=Status.OK, records=[{**header("summary", run_id=""), **doc}])


KIND = UnitKind(name="summary", description="comparisons with verdicts, rankings from them, slowdowns, host-bound",
                commands=commands, collect=collect, timeout_s=lambda c: 120.0, derived=True)
