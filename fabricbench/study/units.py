"""The kinds of study unit: what command each runs and how its output becomes records and a status.

    fabricbench study --dry-run --out run/      (the units, their commands and a time estimate)

A unit is data (Unit); its kind (one UnitKind row in UNIT_KINDS) builds the child's command from the
study so far (a sweep takes its sizes from the traces the train units recorded) and turns what the child
wrote into records. Every child is an ordinary fabricbench command (or fabricbench.study.machine), so the
report can print each unit's command for anyone to rerun by hand; its argv comes from a typed job
(fabricbench/jobs/configs.py: SweepJob, TrainJob, ...), never from a flag list written here. A fabric
goes by its name: a custom fabric's values reach the child through its environment (study/runner.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fabricbench.jobs.configs import (
    EstimateJob,
    RelateJob,
    ReportJob,
    ScalingJob,
    SweepJob,
    TrainJob,
)
from fabricbench.registry import Registry
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.results.writer import read_results
from fabricbench.sizes import SizeSweep, format_size
from fabricbench.study.config import StudyConfig
from fabricbench.study.machine import MachineJob
from fabricbench.study.nodes import NODE_DIR
from fabricbench.study.sweeps import spanning, sweep_plan
from fabricbench.training import repeats
from fabricbench.training.batch import BatchJob

INTRA = "intra-node sweep"  # across nodes: the name of a fabric's sweep inside node 0 (plan.py, the report)

# Unit statuses. A unit recorded with one of DONE is not run again by --resume: "oom" and "flagged" are
# measured outcomes (rerunning would measure the same); error, timeout, waived and interrupted rerun.
DONE = (Status.OK, Status.OOM, Status.FLAGGED)
STATUSES = (Status.OK, Status.OOM, Status.FLAGGED, Status.WAIVED, Status.ERROR, Status.TIMEOUT, Status.INTERRUPTED)


@dataclass(frozen=True, kw_only=True)
class Unit:
    name: str  # stable key in results.jsonl: "train ddp @ default"
    kind: str  # a UNIT_KINDS name
    fabric: str | None = None  # the fabric it runs under; None: no collective runs (machine, estimate, relate)
    strategy: str | None = None  # train units
    repeat: int = 1  # train units: the round (1: the first run of this strategy on this fabric)
    estimate_s: float = 0.0  # rough expected duration (for --dry-run and the progress bar)
    span: bool = False  # across nodes: one job of every node's ranks (study/nodes.py); else node 0's alone
    waived: str | None = None  # why it cannot measure anything here (study/plan.py decides): recorded, not run

    @property
    def slug(self) -> str:
        """The unit's file name stem under DIR/units/."""
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name.replace(" @ ", "@")).strip("_")


@dataclass(kw_only=True)
class Context:
    """What a unit's command may depend on: the study, its directory and the records measured so far."""

    config: StudyConfig
    out_dir: Path
    records: list[dict[str, Any]] = field(default_factory=list)  # latest attempt of every finished unit
    started: float = field(default_factory=time.monotonic)  # when this run of the study began (repeat budget)
    node: int = 0  # whose command is built: node 0's, or a follower's share of a spanning unit

    def unit_file(self, unit: Unit, suffix: str = ".jsonl") -> Path:
        return self.out_dir / "units" / f"{unit.slug}{suffix}"

    def for_node(self, node: int) -> "Context":
        """This context as node `node` sees it: its files in its own folder (NODE_DIR, which the follower
        makes its temporary one), the records node 0 holds (the commands depend on them)."""
        return dataclasses.replace(self, node=node, out_dir=Path(NODE_DIR) if node else self.out_dir)


@dataclass(kw_only=True)
class Outcome:
    status: str
    records: list[dict[str, Any]]
    message: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # stored in the unit record (e.g. resolved sizes)


@dataclass(frozen=True, kw_only=True)
class UnitKind:
    name: str
    description: str
    # -> list of argv lists (one child each, run in order under the unit's fabric), plus details to record
    commands: Callable[[Unit, Context], tuple[list[list[str]], dict[str, Any]]]
    # (unit, ctx, children: [(returncode, stdout, stderr, timed_out)]) -> Outcome
    collect: Callable[[Unit, Context, list[tuple[int | None, str, str, bool]]], Outcome]
    timeout_s: Callable[[StudyConfig], float]
    each_node: bool = False  # across nodes: every node runs it for itself and node 0 keeps each one's output


def shown(argv: list[str]) -> str:
    """The command as a person types it: `fabricbench ...` instead of `/usr/bin/python3 -m fabricbench ...`."""
    if argv[:3] == [sys.executable, "-m", "fabricbench"]:
        argv = ["fabricbench", *argv[3:]]
    elif argv[:2] == [sys.executable, "-m"]:
        argv = ["python3", "-m", *argv[2:]]
    return shlex.join(argv)


def _placement(c: StudyConfig) -> dict[str, Any]:
    return {"device": "cpu", "nprocs": c.nprocs} if c.device == "cpu" else {"gpus": ",".join(map(str, c.gpus))}


def _model(c: StudyConfig) -> dict[str, str]:
    return {"model": c.model} if c.model else {"model_config": os.path.abspath(str(c.model_config))}


def _last_json(stdout: str) -> dict[str, Any] | None:
    """The JSON document a child printed (the whole stdout, else its last line that parses)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        for line in reversed(text.splitlines()):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def _failure(children, what: str) -> Outcome:
    rc, out, err, timed_out = children[-1]
    if timed_out:
        return Outcome(status=Status.TIMEOUT, records=[], message=f"{what} did not finish in time")
    lines = [l.strip() for l in (err or "").splitlines() if l.strip()]
    errs = [l for l in lines if "Error" in l]
    return Outcome(status=Status.ERROR, records=[], message=f"{what} exit {rc}: " + ((errs or lines or ["no output"])[-1])[:400])


def _file_records(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    return list(read_results(path, kind=kind)) if path.exists() else []


# -- machine: versions, GPUs, topology ----------------------------------------------------------------------
def _machine_commands(unit: Unit, ctx: Context):
    c = ctx.config
    cpu = c.device == "cpu"
    job = MachineJob(device=c.device, nprocs=c.nprocs if cpu else None, gpus=None if cpu else tuple(c.gpus))
    return [job.command()], {}


def _machine_collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = _last_json(out)
    if rc != 0 or doc is None:
        return _failure(children, "machine facts")

    return Outcome(status=Status.OK, records=[{**header("machine", run_id=""), **doc}])


# -- estimate: model-state bytes per GPU per strategy ----------------------------------------------------------
def _estimate_commands(unit: Unit, ctx: Context):
    c = ctx.config
    job = EstimateJob(**_model(c), num_gpus=c.world_size, batch_size=batch_of(ctx), **c.shape, as_json=True)
    return [job.command()], {}


def _estimate_collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = _last_json(out)
    if rc != 0 or doc is None:
        return _failure(children, "estimate")

    return Outcome(status=Status.OK, records=[{**header("estimate", run_id=""), **doc}])


# -- train: one strategy on one fabric, with its communication trace ------------------------------------------
def _train_commands(unit: Unit, ctx: Context):
    c = ctx.config
    if unit.repeat > c.min_rounds:
        enough = _enough_runs(unit, ctx)
        if enough:
            return [], {"waived": enough}
    job = TrainJob(strategy=str(unit.strategy), **_model(c), **_placement(c), steps=c.steps,
                   warmup_steps=c.warmup_steps, batch_size=batch_of(ctx), **c.shape, precision=c.precision,
                   repeats=1, target_ci=float(c.target_ci or 0), max_steps=c.max_steps or None,
                   fabric=str(unit.fabric), timeout_s=float(c.train_timeout_s), out=str(ctx.unit_file(unit)),
                   stall_timeout_s=c.stall_timeout_s, **_nodes(unit, ctx))
    return [job.command()], {}


def _nodes(unit: Unit, ctx: Context) -> dict[str, Any]:
    """A spanning train unit's node flags: this node's share of one job, meeting on the study's port + 1."""
    c = ctx.config
    if not unit.span:  # the plan spans units only across nodes
        return {}
    return {"nnodes": c.nnodes, "node_rank": ctx.node, "master_addr": c.master_addr,
            "master_port": int(c.master_port) + 1}


def _enough_runs(unit: Unit, ctx: Context) -> str | None:
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


def batch_of(ctx: Context) -> int:
    """The per-GPU batch: the study's --batch-size, else the one the batch unit picked (8 if it failed)."""
    if ctx.config.batch_size is not None:
        return int(ctx.config.batch_size)
    picked = [r for r in ctx.records if r.get("kind") == "batch" and isinstance(r.get("chosen"), int)]
    return picked[-1]["chosen"] if picked else FALLBACK_BATCH


FALLBACK_BATCH = 8


# -- batch: on GPUs without --batch-size, the batch that keeps the GPU busy ------------------------------------
def _batch_commands(unit: Unit, ctx: Context):
    c = ctx.config
    return [BatchJob(**_model(c), gpu=c.gpus[0], **c.shape, precision=c.precision).command()], {}


def _batch_collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = _last_json(out)
    if rc != 0 or doc is None:
        return _failure(children, "batch pick")

    return Outcome(status=Status.OK, records=[{**header("batch", run_id=""), **doc}],
                   message=f"batch {doc.get('chosen')} per GPU ({doc.get('why')})")


# -- summary: comparisons with verdicts, slowdowns, host-bound notes ---------------------------------------------
def _summary_commands(unit: Unit, ctx: Context):
    return [ReportJob(out_dir=str(ctx.out_dir), as_json=True).command()], {}


def _summary_collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = _last_json(out)
    if rc != 0 or doc is None:
        return _failure(children, "summary")

    return Outcome(status=Status.OK, records=[{**header("summary", run_id=""), **doc}])


def _train_collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = _file_records(ctx.unit_file(unit), kind="train")
    if not recs:
        return _failure(children, "train")
    rec = recs[-1]
    status = rec.get("status") or Status.ERROR
    if status not in STATUSES:
        status = Status.ERROR
    return Outcome(status=status, records=recs, message=rec.get("message"))


# -- sweep: busbw against size on one fabric (sizes: study/sweeps.py) ----------------------------------------------
def _sweep_engine(c: StudyConfig, span: bool) -> dict[str, Any]:
    if span:  # ranks torchrun starts on every node: the torch engine, one GPU per local rank
        return {"engine": "torch", "backend": "gloo" if c.device == "cpu" else "nccl"}
    if c.device == "cpu":
        return {"engine": "torch", "backend": "gloo", "nprocs": c.nprocs}
    return {"engine": "native", "gpus": tuple(c.gpus)}


def _sweep_commands(unit: Unit, ctx: Context):
    c = ctx.config
    plan = sweep_plan(ctx)
    cmds = [SweepJob(ops=",".join(p["ops"]), sizes=p["sizes"], dtype=p["dtype"], iters=c.iters, warmup=c.warmup,
                     **_sweep_engine(c, unit.span), fabric=str(unit.fabric), timeout_s=float(min(c.sweep_timeout_s, 300)),
                     stall_timeout_s=c.stall_timeout_s, out=str(ctx.unit_file(unit)), quiet=True).command() for p in plan]
    return [spanning(c, a, ctx.node) for a in cmds] if unit.span else cmds, {"sweeps": plan}


def _sweep_collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = _file_records(ctx.unit_file(unit), kind="collective")
    bad = [ch for ch in children if ch[0] != 0]
    if not recs or bad:
        o = _failure(bad or children, "sweep")
        return Outcome(status=o.status, records=recs, message=o.message)
    wrong = [r for r in recs if r.get("status") not in (Status.OK, None)]
    msg = f"{len(wrong)} measurement(s) not ok" if wrong else None
    return Outcome(status=Status.OK, records=recs, message=msg)


# -- scaling: inside and across NVLink islands --------------------------------------------------------------------
def _scaling_commands(unit: Unit, ctx: Context):
    c = ctx.config
    biggest = _largest_size(ctx)
    job = ScalingJob(gpus=tuple(c.gpus), ops="all_reduce", sizes=biggest, fabric=str(unit.fabric), iters=c.iters,
                     warmup=c.warmup, out=str(ctx.unit_file(unit)), as_json=True)
    return [job.command()], {"sizes": biggest}


def _largest_size(ctx: Context) -> str:
    sizes = [max(SizeSweep.parse(p["sizes"]).expand()) for p in sweep_plan(ctx)]
    return format_size(min(max(sizes), 1 << 30))


def _scaling_collect(unit: Unit, ctx: Context, children) -> Outcome:
    recs = _file_records(ctx.unit_file(unit), kind="collective")
    if not recs:
        return _failure(children, "scaling")
    rc = children[-1][0]
    return Outcome(status=Status.OK if rc == 0 else Status.ERROR, records=recs,
                   message=None if rc == 0 else "some GPU sets failed; the others are kept")


# -- relate: predicted against observed slowdown -----------------------------------------------------------------
def _relate_commands(unit: Unit, ctx: Context):
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


def _relate_collect(unit: Unit, ctx: Context, children) -> Outcome:
    rc, out, err, _ = children[-1]
    doc = _last_json(out)
    if doc is None:
        return _failure(children, "relate")

    return Outcome(status=Status.OK if rc == 0 else Status.ERROR, records=[{**header("relate", run_id=""), **doc}],
                   message=None if rc == 0 else f"relate exit {rc}")


UNIT_KINDS: Registry[UnitKind] = Registry("unit kind")
for _k in (
    UnitKind(name="machine", description="GPUs, topology, NCCL/driver/torch versions (of every node)",
             commands=_machine_commands, collect=_machine_collect, timeout_s=lambda c: 180.0, each_node=True),
    UnitKind(name="estimate", description="model-state bytes per GPU per strategy",
             commands=_estimate_commands, collect=_estimate_collect, timeout_s=lambda c: 300.0),
    UnitKind(name="train", description="one strategy on one fabric: throughput, memory, comm trace",
             commands=_train_commands, collect=_train_collect, timeout_s=lambda c: c.train_timeout_s + 120),
    UnitKind(name="sweep", description="busbw against size on one fabric",
             commands=_sweep_commands, collect=_sweep_collect, timeout_s=lambda c: c.sweep_timeout_s),
    UnitKind(name="scaling", description="busbw inside and across NVLink islands",
             commands=_scaling_commands, collect=_scaling_collect, timeout_s=lambda c: c.sweep_timeout_s),
    UnitKind(name="relate", description="predicted against observed slowdown per fabric",
             commands=_relate_commands, collect=_relate_collect, timeout_s=lambda c: 300.0),
    UnitKind(name="batch", description="the per-GPU batch that keeps the GPU busy (doubling, out of memory probed)",
             commands=_batch_commands, collect=_batch_collect, timeout_s=lambda c: 600.0),
    UnitKind(name="summary", description="comparisons with verdicts, rankings from them, slowdowns, host-bound",
             commands=_summary_commands, collect=_summary_collect, timeout_s=lambda c: 120.0),
):
    UNIT_KINDS.register(_k.name, _k)
