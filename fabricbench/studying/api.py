"""The library face of the study.

    import fabricbench
    res = fabricbench.study(fabricbench.StudyConfig(out="lab", device="cpu", nprocs=2, fabrics="default,shaped:1gbit",
                            strategies="ddp,fsdp", model="tiny-mistral", steps=5, batch_size=2, seq_len=32))
    res.units          # what happened to each unit (status, seconds, commands)
    res.report_html    # lab/report.html
    fabricbench.study(fabricbench.stored_study("lab"))  # the stored settings; runs what is not recorded ok
    p = fabricbench.study_plan(config)                  # the units and a time estimate; runs nothing (--dry-run)

Each call takes one StudyConfig (its `resume` field says whether the folder's units recorded ok are kept);
stored_study(out) is the config a study folder holds. The CLI (fabricbench/cli/study.py) only maps flags
onto a StudyConfig (or, for a bare --resume, stored_study).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench.cluster.env import on_slurm
from fabricbench.errors import UsageError, expect_config
from fabricbench.files import check_writable
from fabricbench.masking import MASK
from fabricbench.measuring.config import check_local_ranks
from fabricbench.results.status import Status
from fabricbench.studying import durations, hoststore, records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.plan import build_plan
from fabricbench.studying.report import write_report
from fabricbench.studying.nodes import NodeLost
from fabricbench.studying.runner import UnitRun, follow, prepare, run_units
from fabricbench.studying.units import DONE, Unit
from fabricbench.topology import read_topology
from fabricbench.training.models import read_config_json


@dataclass(frozen=True, kw_only=True)
class StudyPlan:
    """What a study would run and about how long it takes, measuring nothing: `study --dry-run`."""

    out_dir: Path
    config: StudyConfig
    plan: list[Unit]  # in run order, each with its estimate_s
    estimate_s: float  # the total's middle figure (units to run, start and report)
    estimate: durations.Estimate  # each unit's and the total's interval, and their sources

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench study --dry-run --json` prints."""
        return {"out_dir": str(self.out_dir), "config": self.config.to_dict(),
                "plan": [dataclasses.asdict(u) for u in self.plan], "estimate_s": self.estimate_s,
                "estimate": self.estimate.to_dict()}


@dataclass(kw_only=True)
class StudyResult:
    out_dir: Path
    config: StudyConfig
    plan: list[Unit]
    units: list[UnitRun] = field(default_factory=list)  # empty on a node above 0 (node 0 runs them)
    results_path: Path | None = None
    report_md: Path | None = None
    report_html: Path | None = None
    estimate_s: float = 0.0  # the plan's total, its middle figure (units to run, start and report)
    estimate: durations.Estimate | None = None  # each unit's and the total's interval, and their sources
    follower: dict[str, int] | None = None  # a node above 0: {"node", "shares" run, "exit" of node 0's study}

    @property
    def ok(self) -> bool:
        return all(u.status in (Status.OK, Status.SKIPPED) for u in self.units)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for u in self.units:
            out[u.status] = out.get(u.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "config": self.config.to_dict(),
                "plan": [dataclasses.asdict(u) for u in self.plan], "estimate_s": self.estimate_s,
                "estimate": self.estimate.to_dict() if self.estimate else None,
                "units": [{"name": u.unit.name, "status": u.status, "duration_s": u.duration_s,
                           "message": u.message, "commands": u.commands} for u in self.units],
                "results": str(self.results_path) if self.results_path else None,
                "report_md": str(self.report_md) if self.report_md else None,
                "report_html": str(self.report_html) if self.report_html else None, "follower": self.follower}


def stored_study(out: str | os.PathLike) -> StudyConfig:
    """The study stored in `out`, to continue there (resume=True). A variant changes only what measures
    nothing (config.RESUMABLE: more rounds, a larger budget, other timeouts), as `study --out DIR --resume
    --max-repeats 15` does: dataclasses.replace(stored_study("lab"), max_repeats=15) adds the rounds an
    undecided comparison asked for; any other change is refused when it runs (runner.prepare)."""
    out = str(out)
    # a results file without a readable plan is a damaged study, said in one line (records.load)
    stored = records.load(out, must_exist=(Path(out) / records.RESULTS).exists()).plan
    if stored is None:
        raise UsageError(f"--resume: {out} holds no study yet; give the study's options (at least --model)")
    hidden = [f for f in stored["study"]["config"].get("fabrics") or () if MASK in f]
    if hidden:  # the values were never written: they cannot be taken from the stored settings
        raise UsageError(f"--resume: the stored fabric(s) {', '.join(hidden)} hide their values, which are "
                         f"never written to disk; give the study's options again, --fabrics with the values")
    return StudyConfig.from_dict({**stored["study"]["config"], "out": out, "resume": True})


def placed(config: StudyConfig) -> StudyConfig:
    """`config` as it runs on this machine: its nodes from Slurm where it names none (cluster/env.on_slurm),
    checked against what only this machine can say (its cores, its GPUs, whether --out can be written, the
    model config file), and its GPUs, where it names none, all visible ones."""
    config = on_slurm(config)
    if config.device == "cpu":  # before --out: a rank count no unit could run is the first thing to say
        check_local_ranks(config.nprocs)
    if config.node_rank == 0:  # the node that writes it
        check_writable(config.out, what="--out", folder=True)
    if config.model_config:  # the file read and its sizes checked now, so --dry-run says what a run would
        read_config_json(Path(config.model_config))
    if config.device == "cuda":
        if fabricbench.gpus.visible_gpu_count() == 0:
            raise UsageError("no CUDA GPU is visible here; study the CPU fabric lab instead: --device cpu "
                             "--nprocs 2 --fabrics default,shaped:1gbit")
        if config.gpus:
            fabricbench.gpus.default_gpus(",".join(map(str, config.gpus)))  # each one visible here
        else:
            config = dataclasses.replace(config, gpus=fabricbench.gpus.default_gpus(None))
    return config


def plan_for(config: StudyConfig) -> list[Unit]:
    topo = None
    if config.device == "cuda":
        topo = read_topology()
    return build_plan(config, topo)


def _estimated(config: StudyConfig, units: list[Unit]) -> tuple[list[Unit], durations.Estimate]:
    """The units with how long each will take here, now, and the estimate itself."""
    existing = records.load(config.out, must_exist=False)
    todo = {u.name for u in units if not (config.resume and existing.status(u.name) in DONE)}
    est = durations.estimate(config, units, done=existing, todo=todo, store=hoststore.read_store(),
                             load=durations.load_now())
    return [dataclasses.replace(u, estimate_s=round(est.units[u.name].s, 1)) for u in units], est


def study_plan(config: StudyConfig) -> StudyPlan:
    """The units `study(config)` would run, and about how long they take; nothing runs, but the out folder
    is refused as a run would refuse it."""
    expect_config(config, StudyConfig, "study_plan")
    config = placed(config)
    units, est = _estimated(config, plan_for(config))
    if config.node_rank == 0:
        prepare(config, resume=config.resume)  # the same refusals a real run would give
    return StudyPlan(out_dir=Path(config.out), config=config, plan=units, estimate_s=est.total.s, estimate=est)


def study(config: StudyConfig, *, report: bool = True, progress: bool | None = None,
          echo: Callable[[str], None] | None = None) -> StudyResult:
    """Run the study `config` says into its out (config.resume: keep the units recorded ok there;
    stored_study(out) continues a study with its stored settings); see the module docstring. study_plan()
    shows what it would run. report, progress and echo say how the caller watches, not what is measured."""
    expect_config(config, StudyConfig, "study")
    config = placed(config)
    units = plan_for(config)
    res = StudyResult(out_dir=Path(config.out), config=config, plan=units)
    if config.node_rank == 0:  # how long each unit will take here, now (a follower runs shares)
        units, res.estimate = _estimated(config, units)
        res.plan, res.estimate_s = units, res.estimate.total.s
    if config.node_rank > 0:  # across nodes: node 0 decides and writes; this node runs its shares
        code, shares = follow(config, echo=echo)
        res.follower = {"node": config.node_rank, "shares": shares, "exit": code}
        return res
    # Ctrl-C propagates from here without a report (a second Ctrl-C would cut it); `fabricbench report`
    # or --resume writes it later from what was recorded.
    try:
        res.units = run_units(config, units, resume=config.resume, echo=echo, progress=progress)
    except NodeLost:  # the units finished before the node went are recorded: their report is written
        if report and (Path(config.out) / records.RESULTS).exists():
            write_report(config.out)
        raise
    res.results_path = Path(config.out) / records.RESULTS
    t0 = time.monotonic()
    if report:
        res.report_md, res.report_html = write_report(config.out)
    # what this run took, for the next estimate on this host (an interrupted study teaches nothing)
    durations.learn(config, records.load(config.out, must_exist=False),
                    report_s=time.monotonic() - t0 if report else None)
    return res

