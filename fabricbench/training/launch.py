"""Run strategies one after another, each in fresh processes under torchrun, and write one record each.

    fabricbench train --strategy all --model tiny-mistral --device cpu --nprocs 2 --steps 6 --out t.jsonl

For every strategy: "waived" when it cannot run here (DeepSpeed missing), else one torchrun
(`python -m torch.distributed.run`, one process per GPU, the fabric's environment) of
fabricbench/training/worker.py. The ranks' files are joined into one kind "train" record:
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
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.measuring.config import PROCS_PER_CORE, cores
from fabricbench.results import ResultWriter, header
from fabricbench.results.context import package_version
from fabricbench.training import estimate, metrics, models, verify
from fabricbench.training.strategies import STRATEGIES

LIBRARIES = ("torch", "accelerate", "transformers", "deepspeed")
MAX_STEPS = 100_000  # optimizer steps per strategy


@dataclass(kw_only=True)
class TrainConfig:
    strategies: list[str]  # names in STRATEGIES, run in this order
    model: str | None = None  # a name in MODELS
    model_config: str | None = None  # a transformers config JSON
    model_path: str | None = None  # a folder of local pretrained weights
    device: str = "cuda"  # "cuda" (one process per GPU in `gpus`) or "cpu" (gloo, `nprocs` processes)
    gpus: tuple[int, ...] = ()  # device ordinals, rank order
    nprocs: int = 1  # processes on this node when device == "cpu"
    steps: int = 8  # optimizer steps in all, warm-up included
    warmup_steps: int = 3  # steps left out of the timing
    batch_size: int = 8  # samples per GPU (per process) per step
    seq_len: int = 512  # tokens per sample (causal LM)
    image_size: int = 224  # pixels per side (image classification)
    lr: float = 1e-4  # AdamW learning rate
    dataset: str | None = None  # local dataset folder (data.py); synthetic when None
    fabric: str = "default"  # a fabric name (fabricbench/fabrics)
    nnodes: int = 1  # torchrun pass-through, for several nodes
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # None: a free port on this host
    timeout_s: float = 1800.0  # one strategy's processes, start to end
    extra_env: dict[str, str] = field(default_factory=dict)  # added to the workers' environment

    @property
    def procs_per_node(self) -> int:
        return len(self.gpus) if self.device == "cuda" else self.nprocs

    @property
    def world_size(self) -> int:
        return self.procs_per_node * self.nnodes

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
            raise UsageError(f"--timeout {self.timeout_s}: must be positive and finite (seconds per strategy)")
        if self.device not in ("cuda", "cpu"):
            raise UsageError(f"--device {self.device}: choose cuda or cpu")
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
        _fabric_env(self.fabric, {})  # an unknown fabric fails before any model is built


def _fabric_env(name: str, base: dict[str, str]) -> dict[str, str]:
    try:
        from fabricbench.fabrics import fabric_env, get_fabric
    except ImportError:
        if name != "default":
            raise UsageError(f"--fabric {name}: only 'default' exists in this build") from None
        return dict(base)
    fe = fabric_env(get_fabric(name), base)
    for w in fe.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return fe.env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(config: TrainConfig) -> dict[str, str]:
    env = _fabric_env(config.fabric, dict(os.environ))
    root = str(Path(fabricbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("ACCELERATE_USE_DEEPSPEED", None)  # the zero strategies set it themselves, in their processes
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, config.gpus))
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed's CPU accelerator (gloo)
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(config.extra_env)
    return env


def launch_command(config: TrainConfig, spec_path: Path) -> list[str]:
    port = config.master_port if config.master_port is not None else _free_port()
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={config.procs_per_node}",
            f"--nnodes={config.nnodes}", f"--node-rank={config.node_rank}",
            f"--master-addr={config.master_addr}", f"--master-port={port}",
            "-m", "fabricbench.training.worker", str(spec_path)]


def run_strategy(config: TrainConfig, name: str, resolved: models.ResolvedModel, psi: int) -> dict[str, Any]:
    """One strategy in fresh processes -> the record body (without the header)."""
    strategy = STRATEGIES.get(name)
    body = _base_body(config, name, resolved, psi)
    why = strategy.unavailable()
    if why:
        return {**body, "status": "waived", "message": why}
    with tempfile.TemporaryDirectory(prefix=f"fabricbench-train-{name}-") as tmp:
        run_dir = Path(tmp)
        spec = {**asdict(config), "strategy": name, "run_dir": str(run_dir)}
        spec.pop("strategies")
        spec_path = run_dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        cmd = launch_command(config, spec_path)
        from fabricbench.errors import FabricWaived
        from fabricbench.fabrics import get_fabric
        from fabricbench.fabrics.apply import applied

        fabric = get_fabric(config.fabric)
        body.update(fabric_env=fabric.public_variables, shaped_rate_bps=fabric.rate_bps)
        try:
            # applied(): the fabric's environment, and for shaped:RATE torchrun inside its namespace.
            with applied(fabric, base_env=worker_env(config)) as launch:
                proc = subprocess.run(launch.argv(cmd), env=launch.env, capture_output=True, text=True,
                                      timeout=config.timeout_s)
            rc, log = proc.returncode, (proc.stdout or "") + (proc.stderr or "")
        except subprocess.TimeoutExpired as e:
            rc, log = None, f"timed out after {config.timeout_s:.0f} s: {e}"
        except FabricWaived as e:
            return {**body, "status": "waived", "message": str(e)}
        ranks = [json.loads(p.read_text()) for p in sorted(run_dir.glob("rank-*.json"),
                                                            key=lambda p: int(p.stem.split("-")[1]))]
    return {**body, **join_ranks(config, strategy.name, ranks, rc=rc, log=log, psi=psi)}


def _base_body(config: TrainConfig, name: str, resolved: models.ResolvedModel, psi: int) -> dict[str, Any]:
    tps = estimate.tokens_per_sample(resolved.config, task=resolved.task, seq_len=config.seq_len,
                                     image_size=config.image_size)
    states = estimate.model_states(psi=psi, num_gpus=config.world_size)[name]
    act = estimate.activation_bytes(resolved.config, task=resolved.task, batch_size=config.batch_size,
                                    seq_len=config.seq_len, image_size=config.image_size)
    return {
        "strategy": name, "model": resolved.name, "task": resolved.task, "params": psi,
        "batch_size": config.batch_size, "global_batch": config.batch_size * config.world_size,
        "seq_len": config.seq_len if resolved.task == models.CAUSAL_LM else None,
        "image_size": config.image_size if resolved.task == models.IMAGE_CLS else None,
        "tokens_per_sample": tps, "device": config.device,
        "gpus": list(config.gpus) if config.device == "cuda" else [], "nranks": config.world_size,
        "nnodes": config.nnodes, "steps": config.steps, "warmup_steps": config.warmup_steps,
        "lr": config.lr, "optimizer": "AdamW (fused on GPU)", "mixed_precision": "bf16",
        "dataset": config.dataset or "synthetic",
        "estimate": {"recipe": "framework", **states, "activation_bytes": act,
                     "with_activations_bytes": states["total_bytes"] + act},
        "versions": {lib: package_version(lib) for lib in LIBRARIES},
    }


def join_ranks(config: TrainConfig, name: str, ranks: list[dict[str, Any]], *, rc: int | None, log: str,
               psi: int) -> dict[str, Any]:
    """The rank files of one run -> status, verification, timing, memory."""
    strategy = STRATEGIES.get(name)
    out: dict[str, Any] = {"status": "ok", "message": None, "launcher_rc": rc}
    mem = {"peak_allocated_bytes": [r.get("peak_allocated_bytes") for r in ranks],
           "peak_reserved_bytes": [r.get("peak_reserved_bytes") for r in ranks]}
    out["memory"] = {**mem, "max_allocated_bytes": _max(mem["peak_allocated_bytes"]),
                     "max_reserved_bytes": _max(mem["peak_reserved_bytes"])}
    oom = [r for r in ranks if r.get("status") == "oom"]
    if oom:
        return {**out, "status": "oom", "message": f"rank {oom[0]['rank']}: {oom[0]['message']}"}
    failed = [r for r in ranks if r.get("status") != "ok"]
    if failed or not ranks or rc not in (0,) or len(ranks) != config.procs_per_node:
        if failed:
            msg = f"rank {failed[0]['rank']}: {failed[0]['message']}"
        else:
            msg = (f"launcher exit {rc}, {len(ranks)} of {config.procs_per_node} rank(s) reported; "
                   f"log tail: {log.strip()[-600:]}")
        return {**out, "status": "error", "message": msg}
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
        return {**out, "status": "error", "message": "strategy check failed: " + "; ".join(problems)}
    per_step = [max(r["step_times_s"][i] for r in ranks) for i in range(config.steps)]
    timed = per_step[config.warmup_steps:]
    out["step_time"] = {**metrics.step_stats(timed), "timed_steps": len(timed), "rule": "slowest rank per step"}
    out["step_times_s"] = per_step
    losses = r0["losses"]
    out.update(first_loss=losses[0], last_loss=losses[-1], losses=losses,
               loss_decreased=losses[-1] < losses[0])
    if not out["loss_decreased"]:
        out.update(status="flagged", message=f"loss did not decrease: {losses[0]:.4f} -> {losses[-1]:.4f}")
    return out


def _max(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def run(config: TrainConfig, writer: ResultWriter, *, echo: Any = None) -> list[dict[str, Any]]:
    """Every strategy of `config`, a record each, written as it ends."""
    config.validate()
    resolved = models.resolve(name=config.model, config_file=config.model_config, path=config.model_path)
    psi = models.count_params(resolved)
    run_id = uuid.uuid4().hex[:12]
    records = []
    for name in config.strategies:
        body = run_strategy(config, name, resolved, psi)
        _add_throughput(body, psi)
        record = {**header("train", run_id=run_id, fabric=config.fabric), **body}
        writer.write(record)
        records.append(record)
        if echo is not None:
            echo(record)
    return records


def _add_throughput(body: dict[str, Any], psi: int) -> None:
    st = body.get("step_times_s")
    if not st:
        return
    timed = st[body["warmup_steps"]:]
    body["throughput"] = metrics.throughput(times_s=timed, global_batch=body["global_batch"],
                                            tokens_per_sample=body["tokens_per_sample"], psi=psi,
                                            nranks=body["nranks"], gpu_name=body.get("gpu_name"))
