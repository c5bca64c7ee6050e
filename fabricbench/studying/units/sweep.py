"""The sweep unit: busbw against size on one fabric (its sizes: studying/sweeps.py); across nodes, one job of
every node's ranks under torchrun."""

from __future__ import annotations

from typing import Any

from fabricbench.jobs.configs import SweepDelivery, sweep_command
from fabricbench.measuring.config import SweepConfig
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.sweeps import spanning, sweep_plan
from fabricbench.studying.units.base import Context, Outcome, Unit, UnitKind, failure, file_records


def engine(c: StudyConfig, span: bool) -> dict[str, Any]:
    """The sweep's engine flags: torch under torchrun across nodes, gloo ranks on CPU, else native."""
    if span:  # ranks torchrun starts on every node: the torch engine, one GPU per local rank
        return {"engine": "torch", "backend": "gloo" if c.device == "cpu" else "nccl"}
    if c.device == "cpu":
        return {"engine": "torch", "backend": "gloo", "nprocs": c.nprocs}
    return {"engine": "native", "gpus": tuple(c.gpus)}


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    plan = sweep_plan(ctx)
    to = SweepDelivery(fabric=str(unit.fabric), out=str(ctx.unit_file(unit)), quiet=True)
    cmds = [sweep_command(SweepConfig(ops=tuple(p["ops"]), sizes=p["sizes"], dtype=p["dtype"], iters=c.iters,
                                      warmup=c.warmup, **engine(c, unit.span),
                                      timeout_s=float(min(c.sweep_timeout_s, 300)),
                                      stall_timeout_s=c.stall_timeout_s), to) for p in plan]
    return [spanning(c, a, ctx.node) for a in cmds] if unit.span else cmds, {"sweeps": plan}


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = file_records(ctx.unit_file(unit), kind="collective")
    bad = [ch for ch in children if ch[0] != 0]
    if not recs or bad:
        o = failure(bad or children, "sweep")
        return Outcome(status=o.status, records=recs, message=o.message)
    wrong = [r for r in recs if r.get("status") not in (Status.OK, None)]
    msg = f"{len(wrong)} measurement(s) not ok" if wrong else None
    return Outcome(status=Status.OK, records=recs, message=msg)


KIND = UnitKind(name="sweep", description="busbw against size on one fabric",
                commands=commands, collect=collect, timeout_s=lambda c: c.sweep_timeout_s)
