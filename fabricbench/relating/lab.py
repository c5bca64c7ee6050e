"""The CPU fabric lab: train and sweep under several fabrics on one machine, then relate.

    python3 benchmarks/relate/cpu_lab.py --fabrics default,shaped:1gbit,shaped:200mbit --strategies ddp,fsdp

Order: the strategies train on the first fabric (the reference) first; their traces say which collectives,
sizes and dtypes a step sends, and every fabric's sweep then covers exactly those ops and that size range
(powers of two, factor 4, up to the next power of two above the largest traced size), so that pricing
interpolates instead of extrapolating. Then every other fabric trains; with repeats, further rounds train
every fabric once each, in order, so that the k-th runs of all fabrics share the machine's state at the
time (on a shared machine whose load drifts, runs grouped by fabric compare one load with another: issue
29's lab on 2 shared cores saw FSDP's 2gbit step 2.2x its default one, grouped). Each command is a fresh
`python -m fabricbench` process given --fabric, which the command applies (fabricbench/fabrics/apply.py:
shaped fabrics run inside a namespace of their own, removed on the way out); all records go to one
JSONL file. A fabric that cannot be applied here (shaped without root) is waived, with the reason.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricbench import jobs
from fabricbench.collectives import COLLECTIVES
from fabricbench.dtypes import DTYPES
from fabricbench.errors import FabricbenchError, UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.jobs.configs import SweepDelivery, child_command, environment, sweep_command
from fabricbench.measuring.config import SweepConfig
from fabricbench.training.config import TrainConfig
from fabricbench.sizes import format_size

# traced dtypes a sweep cannot run (fabricbench/dtypes.py), swept as the runnable type of their element size
STAND_IN = {"int64": "float64", "bool": "uint8"}


@dataclass(kw_only=True)
class LabConfig:
    """What the lab runs. Sizes in bytes, times in seconds."""

    fabrics: list[str]  # the first is where traces are taken (and the usual reference)
    strategies: list[str]
    model: str  # a built-in model name, or a transformers config JSON (*.json) for --model-config
    out: str  # JSONL file that receives every record (appended)
    nprocs: int = 2  # gloo ranks
    precision: str = "fp32"  # fp32 on CPU: bf16 matmuls are ~20x slower there and hide the fabric
    steps: int = 5  # per train run, warm-up included
    warmup_steps: int = 2
    batch_size: int = 2  # per rank
    seq_len: int = 64
    trace_steps: int = 1  # profiled steps after the timed ones (train --trace-steps)
    repeats: int = 1  # rounds of train runs, fresh processes, every fabric once per round (interleaved)
    sweep_iters: int = 3
    sweep_warmup: int = 1
    size_factor: int = 4  # swept sizes step by this factor
    timeout_s: float = 600.0  # per command

    def __post_init__(self) -> None:
        if not self.fabrics or not self.strategies:
            raise UsageError("the lab needs at least one fabric and one strategy")
        if len(set(self.fabrics)) != len(self.fabrics):
            raise UsageError(f"fabrics named twice: {', '.join(self.fabrics)}")
        if self.steps <= self.warmup_steps:
            raise UsageError(f"steps ({self.steps}) must exceed warmup_steps ({self.warmup_steps})")
        if self.size_factor < 2:
            raise UsageError("size_factor must be at least 2")


@dataclass(kw_only=True)
class LabRun:
    out: Path
    seconds: dict[str, float] = field(default_factory=dict)  # "train default", "sweep shaped:1gbit", ...
    waived: dict[str, str] = field(default_factory=dict)  # fabric -> why
    failed: list[str] = field(default_factory=list)


def sweep_plan(train_records: list[dict[str, Any]], factor: int = 4) -> list[tuple[str, list[str], list[int]]]:
    """[(dtype, ops, sizes)] a sweep needs to price these records' traces in their own terms: one entry per
    traced dtype (one the sweep cannot run is swept as STAND_IN's type of the same element size), its ops
    that the sweep knows, and sizes from the power of two at or below its smallest traced S up, by factor,
    to the first power of two whose size after the sweep's rounding (every rank a whole number of elements,
    collectives/base.py) reaches its largest traced S at the trace's rank count: the sweep brackets every
    traced size, so pricing interpolates (a few bytes of float64 need no 4 MiB sweep)."""
    colls = [c for r in train_records for c in ((r.get("comm") or {}).get("collectives") or [])
             if c.get("bytes", 0) > 0 and c.get("op") in COLLECTIVES.names()]
    by_dtype: dict[str, list[dict[str, Any]]] = {}
    for c in colls:
        dt = STAND_IN.get(c["dtype"], c["dtype"])
        if dt in DTYPES:  # another type is priced from a swept one at the same bytes, flagged (curves.py)
            by_dtype.setdefault(dt, []).append(c)
    plan = []
    for dtype, mine in sorted(by_dtype.items()):
        lo = 2 ** math.floor(math.log2(min(c["bytes"] for c in mine)))
        hi = 2 ** math.ceil(math.log2(max(c["bytes"] for c in mine)))
        while any(_swept_bytes(c["op"], hi, dtype, int(c.get("group_size") or 1)) < c["bytes"] for c in mine):
            hi *= 2
        sizes = [lo]
        while sizes[-1] < hi:
            sizes.append(min(sizes[-1] * factor, hi))
        plan.append((dtype, sorted({c["op"] for c in mine}), sizes))
    return plan


def _swept_bytes(op: str, requested: int, dtype: str, nranks: int) -> int:
    """The S a sweep measures when asked for `requested` bytes (rounded down to whole elements per rank)."""
    return COLLECTIVES.get(op).size(requested, DTYPES[dtype], nranks).bytes


def run_lab(config: LabConfig, *, log: Any = None) -> LabRun:
    """Train and sweep per fabric as the module docstring says; returns where the records are and how long
    each part took. A fabric that cannot be applied here (shaped without root) is waived, not fatal."""
    say = log or (lambda msg: None)
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    run = LabRun(out=out)
    first = config.fabrics[0]
    traces = _train(config, first, run, say)
    if first in run.waived:
        raise UsageError(f"the first fabric {first} is waived here ({run.waived[first]}); the lab takes its "
                         f"traces there, so name a fabric that can run first")
    plan = sweep_plan(traces, config.size_factor)
    if not plan:
        raise FabricbenchError(f"the train runs on {first} traced no collective; nothing to sweep "
                               f"(records in {out})")
    for dtype, ops, sizes in plan:
        say(f"sweep plan: {', '.join(ops)} in {dtype} at {', '.join(format_size(s) for s in sizes)}")
    for fab in config.fabrics:
        for dtype, ops, sizes in plan:
            _sweep(config, fab, ops, dtype, sizes, run, say)
        if fab != first and fab not in run.waived:
            _train(config, fab, run, say)
    for k in range(2, config.repeats + 1):  # rounds: every fabric once per round, so round k's runs share
        for fab in config.fabrics:          # the machine's drift (a paired design, docs/domain.md)
            if fab not in run.waived:
                _train(config, fab, run, say, label=f" round {k}")
    return run


def _sweep(config: LabConfig, fabric: str, ops: list[str], dtype: str, sizes: list[int], run: LabRun,
           say: Any) -> None:
    sweep = SweepConfig(ops=tuple(ops), sizes=tuple(sizes), dtype=dtype, iters=config.sweep_iters,
                        warmup=config.sweep_warmup, engine="torch", backend="gloo", nprocs=config.nprocs,
                        timeout_s=config.timeout_s)
    to = SweepDelivery(fabric=fabric, out=str(run.out), quiet=True)
    _under(config, fabric, (sweep_command(sweep, to), to.environment()), f"sweep {get_fabric(fabric).name} {dtype}",
           run, say)


def _train(config: LabConfig, fabric: str, run: LabRun, say: Any, label: str = "") -> list[dict[str, Any]]:
    """One run per strategy on `fabric` (one round: run_lab repeats the rounds)."""
    model = {"model_config" if config.model.endswith(".json") else "model": config.model}
    job = TrainConfig(strategies=tuple(config.strategies), **model, device="cpu", nprocs=config.nprocs,
                      steps=config.steps, warmup_steps=config.warmup_steps, batch_size=config.batch_size,
                      seq_len=config.seq_len, precision=config.precision, trace_steps=config.trace_steps,
                      repeats=1, target_ci=0.0, fabric=fabric, timeout_s=config.timeout_s)
    before = _count(run.out)
    _under(config, fabric, ([*child_command(job), "--out", str(run.out)], environment(fabric)),
           f"train {get_fabric(fabric).name}{label}", run, say)
    return [r for r in _records(run.out)[before:] if r.get("kind") == "train"]


def _under(config: LabConfig, fabric: str, child: tuple[list[str], dict[str, str]], what: str, run: LabRun,
           say: Any) -> None:
    """One fabricbench command (`child`: its argv from a typed config, fabricbench/jobs/configs.py, and its
    environment, which carries a custom fabric's values: the argv names it alone) in a fresh process with
    --fabric (the command applies it: shaped fabrics run in a namespace of their own), its records appended
    to run.out."""
    why = get_fabric(fabric).unavailable()
    if why:
        run.waived[fabric] = why
        say(f"{what}: waived ({why})")
        return
    argv, env = child
    t0 = time.monotonic()
    # a job (fabricbench/jobs): its own process group, dead with us (SIGKILL included), ended as a group on
    # timeout, its temp files in a workspace removed after it
    with jobs.workspace("lab") as ws:
        proc = jobs.run(argv, workspace=ws, env=env, budget_s=config.timeout_s + 60)
    if proc.timed_out:
        run.failed.append(f"{what}: timed out after {config.timeout_s + 60:.0f} s (ended; records so far kept)")
        say(run.failed[-1])
        return
    run.seconds[what] = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        run.failed.append(f"{what}: exit {proc.returncode}: {' | '.join(tail)}")
        say(run.failed[-1])
    else:
        say(f"{what}: {run.seconds[what]:.1f} s")


def _count(path: Path) -> int:
    return len(_records(path))


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
