"""Run strategies one after another, each in fresh processes under torchrun, and write one record each.

    fabricbench train --strategy all --model tiny-mistral --device cpu --nprocs 2 --steps 6 --out t.jsonl

For every strategy: "waived" when it cannot run here (DeepSpeed missing), else one torchrun
(`python -m torch.distributed.run`, one process per GPU, the fabric's environment) of
fabricbench/training/worker.py, run as a job (fabricbench/jobs): each rank reports its start-up and every
step over the job's channel, so a rank silent for --timeout s is named ("rank 1 stopped answering") and
every process is killed then, not when a whole-run limit runs out. The ranks' files are joined into one
kind "train" record:
- status "ok"; "error" when a rank failed or when what ran is not the strategy asked for (verify.py; the
  message says what actually ran), never a result; "oom" with the estimate beside it; "flagged" when the
  loss did not fall; "waived" with the reason.
- the step-time statistics and throughput of the steps after the warm-up (metrics.py), peak memory per
  rank beside the framework recipe's estimate (estimate.py), the bytes each rank held.
An "oom" or an "error" does not stop the strategies after it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench import jobs, procs
from fabricbench.declare import declare
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.jobs.secrets import write_private
from fabricbench.measuring.config import PROCS_PER_CORE, cores
from fabricbench.progress import Progress
from fabricbench.results import ResultWriter, header
from fabricbench.results.context import package_version
from fabricbench.results.schema import UNSET, TrainResult
from fabricbench.results.status import Status
from fabricbench.training import data, estimate, metrics, models, repeats, trace, verify
from fabricbench.training.strategies import PRECISIONS, STRATEGIES, default_precision
from fabricbench.training.strategies.base import accelerate_precision

LIBRARIES = ("torch", "accelerate", "transformers", "deepspeed")
MAX_STEPS = 100_000  # optimizer steps per strategy
STARTUP_S = 600.0  # start-up (torchrun, imports, building the model) may take this long, even with a short
# --timeout
MAX_TRACE_STEPS = 20  # profiled steps: a profile grows with every step and is read in memory
DEFAULT_MAX_STEPS = 40  # steps in all with a target CI, unless --max-steps says otherwise
MAX_REPEATS = 50


@dataclass(kw_only=True)
class TrainConfig:
    strategies: list[str] = field(metadata=declare(  # names in STRATEGIES, run in this order
        "--strategies", "strategy list", "ddp, zero1, zero2, zero3, fsdp, a comma list of them, or all.",
        aliases=("--strategy",), default_by="all"))
    model: str | None = field(default=None, metadata=declare(  # a name in MODELS
        "--model", "text", "A model name (fabricbench train --list)."))
    model_config: str | None = field(default=None, metadata=declare(  # a transformers config JSON
        "--model-config", "input file", "A transformers config JSON; random weights."))
    model_path: str | None = field(default=None, metadata=declare(  # a folder of local pretrained weights
        "--model-path", "input file or folder", "Local pretrained weights (a folder)."))
    device: str = field(default="cuda", metadata=declare(  # "cuda" (one process per GPU in `gpus`) or "cpu"
        "--device", "choice", "cuda: one process per GPU; cpu: gloo ranks (--nprocs of them).",
        choices=("cuda", "cpu")))  # (gloo, `nprocs` processes)
    gpus: tuple[int, ...] = field(default=(), metadata=declare(  # device ordinals, rank order
        "--gpus", "GPU list", "GPU list, one process each, e.g. 0-3.", default_by="all visible"))
    nprocs: int = field(default=2, metadata=declare(  # processes on this node: device "cpu"; on "cuda" with
        "--nprocs", "count", "Processes with --device cpu; with --device cuda --backend gloo, ranks over --gpus "
        "(several per GPU).", lo=1, hi=4096, concept="ranks"))  # backend gloo, ranks over `gpus`
    # round robin (several ranks on one GPU: the one-GPU lab); on "cuda" with nccl one per GPU
    backend: str | None = field(default=None, metadata=declare(  # None: nccl on cuda, gloo on cpu; "gloo" on
        "--backend", "choice", "Collective backend; gloo on cuda for several ranks per GPU.",
        choices=("nccl", "gloo"), default_by="nccl on cuda, gloo on cpu"))  # cuda for the one-GPU lab
    steps: int = field(default=8, metadata=declare(  # optimizer steps at least, warm-up included
        "--steps", "count", "Train steps at least, warm-up included.", lo=1, hi=MAX_STEPS))
    warmup_steps: int = field(default=3, metadata=declare(  # steps left out of the timing
        "--warmup-steps", "count", "Untimed first steps.", lo=1, hi=MAX_STEPS))
    target_ci: float | None = field(default=0.03, metadata=declare(  # go on stepping (and repeating) until the
        "--target-ci", "fraction", "Step on, and repeat, until the median's 95% CI is within this fraction "
        "(0: off).", zero_off=True, lo_open=True, hi_open=True))  # median's 95% CI half-width is
    # within this fraction of it; None: exactly `steps` steps and `repeats` (or 1) runs
    max_steps: int | None = field(default=None, metadata=declare(  # cap on steps with target_ci
        "--max-steps", "count", "Cap on steps while the median's CI exceeds --target-ci.", lo=1, hi=MAX_STEPS,
        default_by="max(--steps, 40)"))  # (None: max(steps, DEFAULT_MAX_STEPS))
    repeats: int | None = field(default=None, metadata=declare(  # runs of each strategy in fresh processes;
        "--repeats", "count", "Runs of each strategy in fresh processes.", lo=1, hi=MAX_REPEATS,
        default_by="3, then more until --target-ci"))  # None: MIN_REPEATS, then more until
    # the run-to-run CI is within target_ci (at most max_repeats, within time_budget_s)
    max_repeats: int = field(default=5, metadata=declare(
        "--max-repeats", "count", "Cap on runs per strategy.", lo=1, hi=MAX_REPEATS))
    time_budget_s: float = field(default=1800.0, metadata=declare(  # no repeat beyond the minimum starts after
        "--repeat-budget", "seconds", "Seconds after which no repeat beyond the minimum starts.", lo=0,
        unit="s", concept="repeat_budget_s", aliases=("--time-budget",)))  # this many seconds
    batch_size: int = field(default=8, metadata=declare(  # samples per GPU (per process) per step
        "--batch-size", "count", "Samples per GPU per step.", lo=1, hi=estimate.MAX_BATCH))
    seq_len: int = field(default=512, metadata=declare(  # tokens per sample (causal LM)
        "--seq-len", "count", "Tokens per sample (causal LM).", lo=1, hi=estimate.MAX_SEQ_LEN))
    image_size: int = field(default=224, metadata=declare(  # pixels per side (image classification)
        "--image-size", "count", "Pixels per side (images).", lo=1, hi=estimate.MAX_IMAGE))
    lr: float = field(default=1e-4, metadata=declare(  # AdamW learning rate
        "--lr", "number", "AdamW learning rate.", lo=0, hi=10, lo_open=True))
    precision: str | None = field(default=None, metadata=declare(  # "bf16", "fp16" or "fp32"; None: bf16 on
        "--precision", "choice", "Compute precision.", choices=("bf16", "fp16", "fp32"),
        default_by="bf16 on cuda, fp32 on cpu"))  # cuda, fp32 on cpu (run_precision)
    trace_steps: int = field(default=2, metadata=declare(  # profiled steps after the timed ones, for the
        "--trace-steps", "count", "Profiled steps after the timed ones, for the communication trace (0: none).",
        lo=0, hi=MAX_TRACE_STEPS))  # record's "comm" (trace.py); 0: none
    dataset: str | None = field(default=None, metadata=declare(  # local dataset folder (data.py); synthetic
        "--dataset", "input file or folder", "Local data: DIR/<class>/<image>, or *.txt / *.npy tokens.",
        default_by="synthetic"))  # when None
    fabric: str = field(default="default", metadata=declare(  # a fabric name (fabricbench/fabrics)
        "--fabric", "fabric", "The NCCL environment to run under (see `fabricbench fabrics`)."))
    nnodes: int = field(default=1, metadata=declare(  # torchrun pass-through, for several nodes
        "--nnodes", "count", "torchrun pass-through.", lo=1, hi=4096))
    node_rank: int = field(default=0, metadata=declare(
        "--node-rank", "count", "torchrun pass-through.", lo=0, hi=4095))
    master_addr: str = field(default="127.0.0.1", metadata=declare(
        "--master-addr", "text", "torchrun pass-through."))
    master_port: int | None = field(default=None, metadata=declare(  # None: a free port on this host
        "--master-port", "count", "torchrun pass-through.", lo=1, hi=65535, default_by="a free port"))
    timeout_s: float = field(default=1800.0, metadata=declare(  # a rank with no progress (start-up phase,
        "--timeout", "seconds", "Seconds a rank may go without progress (a step; start-up gets at least 10 "
        "min) before the run ends naming it.", unit="s", concept="progress_timeout_s"))  # step) for this long
    # ends the run
    budget_s: float | None = None  # one strategy's processes, start to end; None: no limit beyond timeout_s
    extra_env: dict[str, str] = field(default_factory=dict)  # added to the workers' environment

    @property
    def procs_per_node(self) -> int:
        if self.device == "cuda":
            return max(self.nprocs, len(self.gpus)) if self.run_backend == "gloo" else len(self.gpus)
        return self.nprocs

    @property
    def run_backend(self) -> str:
        return self.backend or ("nccl" if self.device == "cuda" else "gloo")

    @property
    def rank_gpus(self) -> list[int]:
        """The GPU of each local rank (round robin over `gpus`); [] on CPU."""
        if self.device != "cuda" or not self.gpus:
            return []
        return [self.gpus[i % len(self.gpus)] for i in range(self.procs_per_node)]

    @property
    def step_cap(self) -> int:
        return self.steps if not self.target_ci else max(self.steps, self.max_steps or DEFAULT_MAX_STEPS)

    @property
    def min_repeats(self) -> int:
        return self.repeats if self.repeats is not None else repeats.MIN_REPEATS

    @property
    def world_size(self) -> int:
        return self.procs_per_node * self.nnodes

    @property
    def run_precision(self) -> str:
        return self.precision or default_precision(self.device)

    def validate(self) -> None:
        for s in self.strategies:
            STRATEGIES.get(s)
        if self.steps < self.warmup_steps + 2:
            raise UsageError(f"--steps {self.steps} with --warmup-steps {self.warmup_steps} leaves "
                             f"{self.steps - self.warmup_steps} timed step(s); need at least 2 (and step 1 is "
                             f"where the sharding is counted)")
        if self.warmup_steps < 1:
            raise UsageError("--warmup-steps must be at least 1: the first step builds state and is not timed")
        estimate.check_sizes(batch_size=self.batch_size, seq_len=self.seq_len, image_size=self.image_size)
        if self.steps > MAX_STEPS:
            raise UsageError(f"--steps {self.steps}: more than {MAX_STEPS:,} steps is a training job, not a "
                             f"measurement; lower it")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UsageError(f"--lr {self.lr}: the learning rate must be positive and finite, e.g. 1e-4")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise UsageError(f"timeout_s={self.timeout_s}: must be positive and finite (seconds a rank may go "
                             f"without progress)")
        if self.budget_s is not None and not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise UsageError(f"budget_s={self.budget_s}: must be positive and finite (seconds per strategy), "
                             f"or None")
        if self.device not in ("cuda", "cpu"):
            raise UsageError(f"--device {self.device}: choose cuda or cpu")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise UsageError(f"--precision {self.precision}: choose {', '.join(PRECISIONS)}")
        ds = [s for s in self.strategies if STRATEGIES.get(s).engine == "deepspeed"]
        if self.precision == "fp16" and self.device == "cpu" and ds:
            raise UsageError(f"--precision fp16 --device cpu: DeepSpeed's CPU accelerator has no fp16 "
                             f"({', '.join(ds)}); use bf16 or fp32 there")
        if not 0 <= self.trace_steps <= MAX_TRACE_STEPS:
            raise UsageError(f"--trace-steps {self.trace_steps}: 0 (no trace) to {MAX_TRACE_STEPS}")
        if self.backend is not None and self.backend not in ("nccl", "gloo"):
            raise UsageError(f"--backend {self.backend}: choose nccl or gloo")
        if self.device == "cpu" and self.run_backend != "gloo":
            raise UsageError("--backend nccl needs --device cuda; CPU ranks talk over gloo")
        if self.device == "cuda" and self.run_backend == "nccl" and self.nprocs > max(1, len(self.gpus)):
            raise UsageError(f"--nprocs {self.nprocs} on {len(self.gpus)} GPU(s): NCCL refuses two ranks on one "
                             f"GPU (\"Duplicate GPU detected\"); add --backend gloo for a lab of several ranks "
                             f"per GPU, or name one GPU per rank with --gpus")
        if self.target_ci is not None and not (math.isfinite(self.target_ci) and 0 < self.target_ci < 1):
            raise UsageError(f"--target-ci {self.target_ci}: a fraction between 0 and 1, e.g. 0.03")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UsageError(f"--max-steps {self.max_steps} is below --steps {self.steps}")
        if self.repeats is not None and not 1 <= self.repeats <= MAX_REPEATS:
            raise UsageError(f"--repeats {self.repeats}: 1 to {MAX_REPEATS}")
        if not 1 <= self.max_repeats <= MAX_REPEATS:
            raise UsageError(f"--max-repeats {self.max_repeats}: 1 to {MAX_REPEATS}")
        if not (math.isfinite(self.time_budget_s) and self.time_budget_s > 0):
            raise UsageError(f"--time-budget {self.time_budget_s}: seconds, positive")
        if self.device == "cpu" and self.nprocs < 1:
            raise UsageError(f"--nprocs {self.nprocs}: need at least 1 process")
        if self.device == "cpu" and self.nprocs > PROCS_PER_CORE * cores():
            raise UsageError(f"--nprocs {self.nprocs}: more CPU ranks than {PROCS_PER_CORE} per core "
                             f"({PROCS_PER_CORE} x {cores()} cores = {PROCS_PER_CORE * cores()}); lower it")
        if self.procs_per_node < 1:
            raise UsageError(f"{self.procs_per_node} processes: name GPUs with --gpus or use --nprocs N")
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--nnodes {self.nnodes} --node-rank {self.node_rank}: need nnodes >= 1 and "
                             f"0 <= node-rank < nnodes")
        if not self.master_addr.strip():
            raise UsageError("--master-addr is empty; give the rank-0 host, e.g. 127.0.0.1")
        if self.master_port is not None and not 1 <= self.master_port <= 65535:
            raise UsageError(f"--master-port {self.master_port}: a TCP port is 1-65535")
        given = [x for x in (self.model, self.model_config, self.model_path) if x]
        if len(given) != 1:
            raise UsageError("name exactly one of --model NAME, --model-config FILE, --model-path DIR "
                             f"(got {len(given)}); models: {', '.join(models.MODELS.names())}")
        if self.model:
            models.MODELS.get(self.model)
        missing = [lib for lib in ("accelerate", "transformers") if importlib.util.find_spec(lib) is None]
        if missing:
            raise UsageError(f'train needs {" and ".join(missing)}: pip install "fabricbench[train]"')
        get_fabric(self.fabric)  # an unknown fabric fails before any model is built


def _local_devices(config: TrainConfig) -> list[int] | None:
    """The CUDA index (inside CUDA_VISIBLE_DEVICES) of each local rank, where ranks share GPUs; else None."""
    ranks = config.rank_gpus
    if len(set(ranks)) == len(ranks):
        return None
    visible = list(dict.fromkeys(config.gpus))
    return [visible.index(g) for g in ranks]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(config: TrainConfig) -> dict[str, str]:
    """The ranks' environment before the fabric is applied (jobs.run applies it)."""
    env = dict(os.environ)
    root = str(Path(fabricbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("ACCELERATE_USE_DEEPSPEED", None)  # the zero strategies set it themselves, in their processes
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, dict.fromkeys(config.gpus)))
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed's CPU accelerator (gloo)
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(config.extra_env)
    return env


def launch_command(config: TrainConfig, spec_path: Path) -> list[str]:
    """torchrun, whose ranks start under fabricbench.procs' guard: torchrun puts each rank in a session of
    its own, out of reach of a group kill, so each rank asks for the death signal itself."""
    port = config.master_port if config.master_port is not None else _free_port()
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={config.procs_per_node}",
            f"--nnodes={config.nnodes}", f"--node-rank={config.node_rank}",
            f"--master-addr={config.master_addr}", f"--master-port={port}",
            *procs.guard_argv("fabricbench.training.worker", str(spec_path))]


def run_strategy(config: TrainConfig, name: str, resolved: models.ResolvedModel, psi: int, *,
                 on_progress=None) -> dict[str, Any]:
    """One strategy in fresh processes -> the record body (without the header); `on_progress(who, data)`
    sees each rank's steps (jobs.run)."""
    strategy = STRATEGIES.get(name)
    body = _base_body(config, name, resolved, psi)
    why = strategy.unavailable()
    if why:
        return {**body, "status": Status.WAIVED, "message": why}
    fabric = get_fabric(config.fabric)
    body.update(fabric_env=fabric.public_variables, shaped_rate_bps=fabric.rate_bps)
    first = config.node_rank * config.procs_per_node
    with jobs.workspace(f"train-{name}") as run_dir:  # removed on Ctrl-C/SIGTERM too; after a SIGKILL, next start
        spec = {**asdict(config), "strategy": name, "run_dir": str(run_dir), "fabric": fabric.name,
                "max_steps": config.step_cap, "backend": config.backend, "local_devices": _local_devices(config)}
        spec.pop("strategies")
        spec.pop("extra_env")  # the environment reaches the ranks as their environment only
        spec_path = run_dir / "spec.json"
        write_private(spec_path, json.dumps(spec))
        # jobs.run: the fabric applied (environment; torchrun inside the namespace of shaped:RATE),
        # torchrun in its own process group, dead with us; a rank silent for --timeout s, the budget or
        # Ctrl-C/SIGTERM end torchrun and its ranks before this returns or raises.
        res = jobs.run(launch_command(config, spec_path), workspace=run_dir, env=worker_env(config), fabric=fabric,
                       stall_s=config.timeout_s, startup_s=max(config.timeout_s, STARTUP_S),
                       budget_s=config.budget_s,
                       expect=[f"rank {first + r}" for r in range(config.procs_per_node)], on_progress=on_progress)
        for w in res.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if res.waived:
            return {**body, "status": Status.WAIVED, "message": res.waived}
        rc, log = res.returncode, res.stdout + res.stderr
        if res.message:
            log = f"{res.message}; torchrun and its ranks were killed\n{log}"
        ranks = _rank_files(run_dir)
    stalled = int(res.stalled.split()[-1]) if res.stalled and res.stalled.startswith("rank ") else None
    unfinished = _unfinished(config, ranks, rc=rc, log=log, timed_out=res.timed_out, stalled=stalled,
                             why=res.message)
    if unfinished is not None:
        return {**body, **unfinished}
    return {**body, **join_ranks(config, strategy.name, ranks, rc=rc, log=log, psi=psi)}


def _rank_files(run_dir: Path) -> list[dict[str, Any]]:
    """The ranks' files in rank order; one torn or half-written is skipped (the worker replaces it whole)."""
    ranks = []
    for p in sorted(run_dir.glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        try:
            ranks.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return ranks


def _unfinished(config: TrainConfig, ranks: list[dict[str, Any]], *, rc: int | None, log: str,
                timed_out: bool, stalled: int | None = None, why: str | None = None) -> dict[str, Any] | None:
    """A run that ended with a rank still "running" (killed, crashed in C, timed out), or with a rank that
    never wrote its file -> status "error" naming the rank and its step count, with the steps every rank
    finished kept (slowest rank per step, as join_ranks times them). None: every rank finished."""
    by_rank = {int(r.get("rank", i)): r for i, r in enumerate(ranks)}
    missing = [r for r in range(config.procs_per_node) if r not in by_rank]
    running = [r for r, doc in sorted(by_rank.items()) if doc.get("status") == Status.RUNNING]
    if not missing and not running:
        return None
    if stalled is None and not timed_out and any(d.get("status") == Status.OOM for d in by_rank.values()):
        # A rank out of memory is the run's outcome, a result (join_ranks): torchrun then stops the other
        # ranks with SIGTERM, and one stopped before its own step would otherwise be named as the cause.
        return None
    culprit = stalled if stalled is not None else _root_cause(log)
    dead = culprit if culprit is not None and (culprit in running or culprit in missing) else \
        (missing or running)[0]
    steps = {r: len(doc.get("step_times_s") or []) for r, doc in by_rank.items()}
    k = steps.get(dead, 0)
    how = _exit_text(log, dead)
    if stalled is not None and dead == stalled:
        msg = f"{why}; every rank was killed"
    elif timed_out:
        msg = f"timed out after {config.budget_s:g} s with rank {dead} at {k} of {config.steps} steps"
    else:
        msg = f"rank {dead} died after {k} of {config.steps} steps{how}"
    others = [f"rank {r}: {str(doc.get('message'))[:160]}" for r, doc in sorted(by_rank.items())
              if doc.get("status") not in (Status.RUNNING, Status.OK) and doc.get("message")]
    if others:
        msg += "; then " + "; ".join(others)
    done = min([steps.get(r, 0) for r in range(config.procs_per_node)] or [0])
    per_step = [max(by_rank[r]["step_times_s"][i] for r in by_rank) for i in range(done)]
    r0 = by_rank.get(0, {})
    out: dict[str, Any] = {"status": Status.ERROR, "message": msg, "launcher_rc": rc, "rank_died": dead,
                           "steps_completed": done, "step_times_s": per_step,
                           "losses": (r0.get("losses") or [])[:done]}
    timed = per_step[config.warmup_steps:]
    if timed:
        out["step_time"] = {**metrics.step_stats(timed), "timed_steps": len(timed),
                            "rule": "slowest rank per step (the steps every rank finished)"}
    return out


def _root_cause(log: str) -> int | None:
    """The rank torchrun names as the first failure ("Root Cause ... rank: 1 (local_rank: 1)")."""
    import re

    m = re.search(r"Root Cause[\s\S]*?\brank\s*:\s*(\d+)", log)
    return int(m.group(1)) if m else None


def _exit_text(log: str, rank: int) -> str:
    import re

    # torchrun's summary has one block per failed rank ("rank : 1 (local_rank: 1)" then "exitcode : -9"),
    # under "Root Cause" or under "Other Failures": the killed rank is often not the first observed (its
    # peer fails on the closed connection first), so its own block is looked up wherever it is.
    m = re.search(r"\brank\s*:\s*%d\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)" % rank, log)
    if not m:
        return ""
    code = int(m.group(1))
    if code < 0:
        import signal

        try:
            return f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f" (signal {-code})"
    return f" (exit status {code})"


def _base_body(config: TrainConfig, name: str, resolved: models.ResolvedModel, psi: int) -> dict[str, Any]:
    tps = estimate.tokens_per_sample(resolved.config, task=resolved.task, seq_len=config.seq_len,
                                     image_size=config.image_size)
    precision = config.run_precision
    recipe = "framework-fp32" if precision == "fp32" else "framework"
    states = estimate.model_states(psi=psi, num_gpus=config.world_size, recipe=recipe)[name]
    act = estimate.activation_bytes(resolved.config, task=resolved.task, batch_size=config.batch_size,
                                    seq_len=config.seq_len, image_size=config.image_size, precision=precision)
    return {
        "strategy": name, "model": resolved.name, "task": resolved.task, "params": psi,
        "batch_size": config.batch_size, "global_batch": config.batch_size * config.world_size,
        "seq_len": config.seq_len if resolved.task == models.CAUSAL_LM else None,
        "image_size": config.image_size if resolved.task == models.IMAGE_CLS else None,
        "tokens_per_sample": tps, "device": config.device,
        "gpus": list(config.gpus) if config.device == "cuda" else [], "nranks": config.world_size,
        "rank_gpus": config.rank_gpus, "backend": config.run_backend,
        "nnodes": config.nnodes, "steps": config.steps, "warmup_steps": config.warmup_steps,
        "lr": config.lr, "optimizer": "AdamW (fused on GPU)",
        "precision": precision, "mixed_precision": accelerate_precision(precision),
        "dataset": config.dataset or "synthetic",
        "estimate": {"recipe": recipe, **states, "activation_bytes": act,
                     "with_activations_bytes": states["total_bytes"] + act},
        "versions": {lib: package_version(lib) for lib in LIBRARIES},
    }


def join_ranks(config: TrainConfig, name: str, ranks: list[dict[str, Any]], *, rc: int | None, log: str,
               psi: int) -> dict[str, Any]:
    """The rank files of one run -> status, verification, timing, memory."""
    strategy = STRATEGIES.get(name)
    out: dict[str, Any] = {"status": Status.OK, "message": None, "launcher_rc": rc}
    mem = {"peak_allocated_bytes": [r.get("peak_allocated_bytes") for r in ranks],
           "peak_reserved_bytes": [r.get("peak_reserved_bytes") for r in ranks]}
    out["memory"] = {**mem, "max_allocated_bytes": _max(mem["peak_allocated_bytes"]),
                     "max_reserved_bytes": _max(mem["peak_reserved_bytes"])}
    oom = [r for r in ranks if r.get("status") == Status.OOM]
    if oom:
        return {**out, "status": Status.OOM, "message": f"rank {oom[0]['rank']}: {oom[0]['message']}"}
    failed = [r for r in ranks if r.get("status") != Status.OK]
    if failed or not ranks or rc not in (0,) or len(ranks) != config.procs_per_node:
        if failed:
            msg = f"rank {failed[0]['rank']}: {failed[0]['message']}"
        else:
            msg = (f"launcher exit {rc}, {len(ranks)} of {config.procs_per_node} rank(s) reported; "
                   f"log tail: {log.strip()[-600:]}")
        return {**out, "status": Status.ERROR, "message": msg}
    r0 = ranks[0]
    held = [verify.Holdings(**r["holdings"]) for r in ranks]
    problems = verify.check(strategy, engine=(r0["engine"], r0["zero_stage"]), world_size=r0["world_size"],
                            expected_world=config.world_size, psi=psi, held=held)
    out.update(engine=r0["engine"], zero_stage=r0["zero_stage"], wrapper=r0["wrapper"],
               world_size=r0["world_size"], accelerate_num_processes=r0.get("accelerate_num_processes"),
               distributed_type=r0.get("distributed_type"), gpu_name=r0.get("gpu_name"),
               holdings=[h.as_dict() for h in held],
               held_fraction={k: [getattr(h, f"{k}_numel") / (psi * (2 if k == "optimizer" else 1)) for h in held]
                              for k in ("params", "grads", "optimizer")})
    if problems:
        return {**out, "status": Status.ERROR, "message": "strategy check failed: " + "; ".join(problems)}
    n_steps = min(len(r["step_times_s"]) for r in ranks)  # equal: rank 0's stopping rule is broadcast
    per_step = [max(r["step_times_s"][i] for r in ranks) for i in range(n_steps)]
    timed = per_step[config.warmup_steps:]
    out["step_time"] = {**metrics.step_stats(timed, first_index=config.warmup_steps), "timed_steps": len(timed),
                        "rule": "slowest rank per step", "target_ci": config.target_ci,
                        "converged": None}
    if config.target_ci:
        ci = out["step_time"]["ci95_rel"]
        out["step_time"]["converged"] = ci is not None and ci <= config.target_ci
    out["step_times_s"] = per_step
    if r0.get("nccl"):
        out["nccl"] = r0["nccl"]
    if config.trace_steps:
        out["comm"] = trace.join([r.get("comm") or {"error": "no trace in the rank file"} for r in ranks],
                                 backend=r0.get("backend") or ("nccl" if config.device == "cuda" else "gloo"),
                                 world_size=r0["world_size"], sends=strategy.textbook_sends, psi=psi,
                                 precision=config.run_precision, timed_step_s=out["step_time"]["median_s"])
    out["gpu_busy_fraction"] = _busy(out.get("comm"), config)
    losses = r0["losses"]
    out.update(first_loss=losses[0], last_loss=losses[-1], losses=losses,
               loss_decreased=losses[-1] < losses[0])
    if not out["loss_decreased"]:
        out.update(status=Status.FLAGGED, message=f"loss did not decrease: {losses[0]:.4f} -> {losses[-1]:.4f}")
    return out


def _busy(comm: Any, config: TrainConfig) -> float | None:
    """Kernel time over step time in the profiled steps (trace.py's timeline, mean over ranks); None on CPU
    or without a trace. Ranks sharing one GPU each see every rank's kernels, so there it is the GPU's own
    busy fraction, as nvidia-smi would give it."""
    tl = (comm or {}).get("timeline") if isinstance(comm, dict) else None
    if config.device != "cuda" or not isinstance(tl, dict):
        return None
    return tl.get("busy_fraction")


def _max(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def run(config: TrainConfig, writer: ResultWriter, *, echo: Any = None, quiet: bool = False) -> list[dict[str, Any]]:
    """Every strategy of `config` in rounds of fresh processes, a record per run, written as it ends.

    Rounds interleave the strategies (A B C A B C, never A A A B B B), so that a drift of the machine hits
    all alike. After min_repeats rounds a strategy whose run-to-run CI (repeats.py) is within target_ci,
    or whose run did not end ok (an oom or a waiver repeats itself), runs no more; the others go on up to
    max_repeats rounds while time_budget_s lasts. With `repeats` given, exactly that many rounds.
    Progress (each rank's step) goes to stderr unless quiet (fabricbench/progress.py)."""
    config.validate()
    resolved = models.resolve(name=config.model, config_file=config.model_config, path=config.model_path)
    data.check(task=resolved.task, config=resolved.config, dataset=config.dataset, seq_len=config.seq_len,
               world=config.world_size)  # a dataset that cannot feed the ranks fails here, not in every rank
    psi = models.count_params(resolved)
    run_id = uuid.uuid4().hex[:12]
    records: list[dict[str, Any]] = []
    t0 = time.monotonic()
    todo = list(config.strategies)
    rnd = 0
    # the number of rounds is decided as they go: the bar counts runs and names each rank's step
    with Progress("train", total=None, quiet=quiet) as bar:
        while todo:
            rnd += 1
            for name in todo:
                label = f"{name} (round {rnd})" if rnd > 1 else name
                bar.update(item=f"{label}: starting")
                body = run_strategy(config, name, resolved, psi, on_progress=_steps(bar, config, label))
                result = TrainResult.from_dict({**body, "repeat": rnd})
                result.context = header("train", run_id=run_id, fabric=config.fabric)
                _add_throughput(result, psi)
                record = result.to_dict()  # the one place a train result becomes a dict
                note = repeats.host_bound_note(record.get("gpu_busy_fraction"))
                if note:
                    record["host_bound"] = note
                writer.write(record)
                records.append(record)
                bar.advance(item=f"{label}: {record.get('status')}")
                if echo is not None:  # on a terminal the bar stays below what echo prints
                    echo(record)
            todo = repeats.still_to_run(config, records, round_=rnd, elapsed_s=time.monotonic() - t0)
    return records


def _steps(bar: Progress, config: TrainConfig, label: str):
    """A rank's progress message -> the bar's text: each rank's step, or the phase it is in."""
    seen: dict[str, int] = {}

    def on_progress(who: str, data: dict[str, Any]) -> None:
        if isinstance(data.get("step"), int):
            seen[who] = data["step"]
            ranks = ", ".join(f"{w.replace('rank ', 'r')} {s}/{config.steps}" for w, s in sorted(seen.items()))
            bar.update(item=f"{label}: step {ranks}")
        elif data.get("phase"):
            bar.update(item=f"{label}: {who} {data['phase']}")
    return on_progress


def _add_throughput(result: TrainResult, psi: int) -> None:
    st = result.step_times_s
    if st is UNSET or not st:
        return
    timed = st[result.warmup_steps:]
    result.throughput = metrics.throughput(times_s=timed, global_batch=result.global_batch,
                                           tokens_per_sample=result.tokens_per_sample, psi=psi,
                                           nranks=result.nranks,
                                           gpu_name=None if result.gpu_name is UNSET else result.gpu_name)
