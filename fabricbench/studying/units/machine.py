"""The machine unit: GPUs, topology, NCCL/driver/torch versions (on every node, each node's kept)."""

from __future__ import annotations

from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.studying.machine import MachineJob
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, last_json


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    cpu = c.device == "cpu"
    job = MachineJob(device=c.device, nprocs=c.nprocs if cpu else None, gpus=None if cpu else tuple(c.gpus))
    return [job.command()], {}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = last_json(out)
    if rc != 0 or doc is None:
        return failure(children, "machine facts")
    return Outcome(status=Status.OK, records=[{**header("machine", run_id=""), **doc}])


KIND = UnitKind(name="machine", description="GPUs, topology, NCCL/driver/torch versions (of every node)",
                commands=commands, collect=collect, timeout_s=lambda c: 180.0, each_node=True)
