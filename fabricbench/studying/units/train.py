"""The train unit: one strategy on one fabric, with its communication trace; a round past the minimum
only while a question is open (enough_runs)."""

from __future__ import annotations

import time
from typing import Any

from fabricbench.fabrics import get_fabric
from fabricbench.jobs.configs import child_command
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.units.base import (STATUSES, Context, Outcome, Unit, UnitKind, batch_of, failure,
                                          file_records, model_args, placement)
from fabricbench.training import repeats
from fabricbench.training.config import TRACE_STEPS, TrainConfig


def commands(unit: Unit, ctx: Context):
    c = ctx.config
    if unit.repeat > c.min_rounds:
        enough = enough_runs(unit, ctx)
        if enough:
            return [], {"waived": enough}
    # the unit's fabric as the study was given it: its argv names it alone, its values travel in the
    # environment (runner.py), and the config checks it as `train` would
    fabric = next((s for s in c.fabrics if get_fabric(s).name == unit.fabric), str(unit.fabric))
    job = TrainConfig(strategies=str(unit.strategy), **model_args(c), **placement(c), steps=c.steps,
                      warmup_steps=c.warmup_steps, batch_size=batch_of(ctx), **c.shape, precision=c.precision,
                      repeats=1, target_ci=float(c.target_ci or 0), max_steps=c.max_steps or None, fabric=fabric,
                      timeout_s=float(c.train_timeout_s), stall_timeout_s=c.stall_timeout_s,
                      **traced(unit, ctx), **node_flags(unit, ctx))
    unread = frozenset({"seq_len", "image_size"} - set(c.shape))  # train ignores them: the command says none
    return [[*child_command(job, leave_out=unread), "--out", str(ctx.unit_file(unit))]], {}


def alone(unit: Unit, c: StudyConfig) -> bool:
    """Whether the unit's run has one rank: this node's ranks, times the nodes where the unit spans them."""
    return c.ranks_per_node * (c.nnodes if unit.span else 1) == 1


def profiles(unit: Unit, c: StudyConfig) -> bool:
    """Whether the unit's round profiles steps: not past the study's --trace-rounds (a later round times
    steps alone), and a run of one rank (no collective to trace) in its first round only, for the report's
    GPU-busy fraction."""
    return unit.repeat <= c.trace_rounds and not (alone(unit, c) and unit.repeat > 1)


def traced(unit: Unit, ctx: Context) -> dict[str, Any]:
    """The child's --trace-steps: 0 where the round does not profile; train's default (2 where the run has
    peers) where it does, spelt out for a run of one rank, whose own default is 0."""
    if not profiles(unit, ctx.config):
        return {"trace_steps": 0}
    return {"trace_steps": TRACE_STEPS} if alone(unit, ctx.config) else {}


def node_flags(unit: Unit, ctx: Context) -> dict[str, Any]:
    """A spanning train unit's node flags: this node's share of one job, meeting on the study's port + 1."""
    c = ctx.config
    if not unit.span:  # the plan spans units only across nodes
        return {}
    return {"nnodes": c.nnodes, "node_rank": ctx.node, "master_addr": c.master_addr,
            "master_port": int(c.master_port) + 1}


def enough_runs(unit: Unit, ctx: Context) -> str | None:
    """Why a round past the minimum is not run (every comparison decided and every figure within
    --target-ci, the budget spent, or the last run not ok); None: run it. Judged on the earlier rounds
    only, so a round is all or nothing (pairs stay whole); a begun round is finished."""
    c = ctx.config
    trains = [r for r in ctx.records if r.get("kind") == "train"]
    mine = [r for r in trains if r.get("strategy") == unit.strategy and (r.get("fabric") or "default") == unit.fabric]
    if not mine or mine[-1].get("status") not in repeats.OK:
        return f"not repeated: the last run of {unit.strategy} @ {unit.fabric} did not end ok"
    if any(repeats.round_of(r) == unit.repeat for r in trains):
        return None  # this round has begun: finish it, so that its runs have their pairs
    before = [r for r in trains if (repeats.round_of(r) or 0) < unit.repeat]
    open_ = repeats.open_questions(before, margin=c.margin, target_ci=c.target_ci, fabrics=list(c.fabric_names),
                                   reference=c.fabric_names[0], **c.looks)
    if not open_:
        return f"not needed: after {unit.repeat - 1} rounds every comparison is decided and every figure precise"
    if time.monotonic() - ctx.started > c.repeat_budget_s:
        return f"not run: the study's repeat budget ({c.repeat_budget_s:g} s) is spent with {len(open_)} " \
               "question(s) open: " + "; ".join(open_)[:600]
    return None


def collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = file_records(ctx.unit_file(unit), kind="train")
    if not recs:
        return failure(children, "train")
    rec = recs[-1]
    status = rec.get("status") or Status.ERROR
    if status not in STATUSES:
        status = Status.ERROR
    return Outcome(status=status, records=recs, message=rec.get("message"))


KIND = UnitKind(name="train", description="one strategy on one fabric: throughput, memory, comm trace",
                commands=commands, collect=collect, timeout_s=lambda c: c.train_timeout_s + 120)
