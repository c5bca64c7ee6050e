"""What one `fabricbench train` run is: TrainConfig, its derived counts (ranks per node, world size, each
rank's GPU) and its checks, run once when a config is built (frozen: a variant is dataclasses.replace,
which checks it again), so every path (CLI, fabricbench.train) holds a checked config before anything
starts.

    fabricbench train --strategy all --model tiny-mistral --device cpu --nprocs 2 --steps 6 --out t.jsonl
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from typing import ClassVar

from fabricbench.declare import check, declare, shared
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.gpus import parse_gpus
from fabricbench.jobs.configs import argv_field
from fabricbench.jobs.heartbeat import STALL_TIMEOUT
from fabricbench.statistics.comparison import MARGIN
from fabricbench.measuring.config import check_local_ranks
from fabricbench.training import estimate, models, repeats
from fabricbench.training.repeats import DEFAULT_MAX_REPEATS
from fabricbench.training.strategies import PRECISIONS, STRATEGIES, default_precision

MAX_STEPS = 100_000  # optimizer steps per strategy
STARTUP_S = 600.0  # start-up (torchrun, imports, building the model) may take this long, even with a short
# --timeout
MAX_TRACE_STEPS = 20  # profiled steps: a profile grows with every step and is read in memory
TRACE_STEPS = 2  # profiled steps of a run with peers unless --trace-steps says otherwise
DEFAULT_MAX_STEPS = 40  # steps in all with a target CI, unless --max-steps says otherwise
MAX_REPEATS = 50  # runs per strategy (train) and per strategy and fabric (study): --repeats, --max-repeats
CPU_RANKS = 2  # --device cpu without --nprocs: two gloo ranks, the fewest that exchange a gradient

@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # A child `fabricbench train` (study's and qualify's units, the relate lab) is this config's fields as
    # options (jobs/configs.child_command), its resume key their hash (job_key): argv_field says how.
    PROGRAM: ClassVar[tuple[str, ...]] = ("fabricbench", "train")
    strategies: str | tuple[str, ...] | list[str] = field(metadata=declare(  # names in STRATEGIES, run in
        # this order; "all" or a comma text is resolved where the config is placed (training/api.py)
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
    gpus: str | tuple[int, ...] = field(default=(), metadata=declare(  # device ordinals, rank order (a GPU
        # list text is read as the CLI reads it); () on cuda: every visible one, decided where it is placed
        "--gpus", "GPU list", "GPU list, one process each, e.g. 0-3.", default_by="all visible"))
    nprocs: int | None = field(default=None, metadata=declare(  # processes on this node: device "cpu"; on
        "--nprocs", "count", "Processes with --device cpu; with --device cuda --backend gloo, ranks over --gpus "
        "(several per GPU).", lo=1, hi=4096, concept="ranks",  # "cuda" with backend gloo, ranks over `gpus`
        default_by=f"{CPU_RANKS} with --device cpu, one per --gpus entry on cuda"))
    # round robin (several ranks on one GPU: the one-GPU lab); on "cuda" with nccl one per GPU. None: decided
    # here (procs_per_node), so the library and the CLI agree without either patching the other's default
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
    max_repeats: int = field(default=DEFAULT_MAX_REPEATS, metadata=declare(
        "--max-repeats", "count", "Cap on runs per strategy.", lo=1, hi=MAX_REPEATS))
    time_budget_s: float = field(default=1800.0, metadata={**argv_field(flag="--repeat-budget", keyed=False), **declare(
        # no repeat beyond the minimum starts after
        "--repeat-budget", "seconds", "Seconds after which no repeat beyond the minimum starts.", lo=0,
        lo_open=True, unit="s", concept="repeat_budget_s", aliases=("--time-budget",))})  # this many seconds
    margin: float = field(default=MARGIN, metadata=declare(  # δ: strategies within ±margin are "equivalent"
        "--margin", "fraction", "Two figures within ±this fraction are \"equivalent\" (docs/comparisons.md).",
        lo=0, hi=0.5, lo_open=True, hi_open=True))  # (statistics/comparison.py); also when repeats stop
    batch_size: int = field(default=8, metadata=declare(  # samples per GPU (per process) per step
        "--batch-size", "count", "Samples per GPU per step.", lo=1, hi=estimate.MAX_BATCH))
    seq_len: int = field(default=512, metadata=declare(  # tokens per sample (causal LM)
        "--seq-len", "count", "Tokens per sample (causal LM).", lo=1, hi=estimate.MAX_SEQ_LEN))
    image_size: int = field(default=224, metadata=declare(  # pixels per side (image classification)
        "--image-size", "count", "Pixels per side (images).", lo=1, hi=estimate.MAX_IMAGE))
    lr: float = field(default=1e-4, metadata=declare(  # AdamW learning rate
        "--lr", "number", "AdamW learning rate.", lo=0, hi=10, lo_open=True))
    precision: str | None = field(default=None, metadata=declare(  # "bf16", "fp16" or "fp32"; None: bf16 on
        "--precision", "choice", "Compute precision.", choices=tuple(PRECISIONS),
        default_by="bf16 on cuda, fp32 on cpu"))  # cuda, fp32 on cpu (run_precision)
    # profiled steps after the timed ones, for the record's "comm" (trace.py); 0: none. None: TRACE_STEPS where
    # the run has peers; alone (one rank) no collective runs, and a profile would cost a warm 1B run ~2 s of
    # its ~8 s for the GPU-busy fraction only, which --trace-steps N still gives (trace_steps_run)
    trace_steps: int | None = field(default=None, metadata=declare(
        "--trace-steps", "count", "Profiled steps after the timed ones, for the communication trace (0: none).",
        lo=0, hi=MAX_TRACE_STEPS, default_by=f"{TRACE_STEPS} where the run has peers, 0 on one rank"))
    dataset: str | None = field(default=None, metadata=declare(  # local dataset folder (data.py); synthetic
        "--dataset", "input file or folder", "Local data: DIR/<class>/<image>, or *.txt / *.npy tokens.",
        default_by="synthetic"))  # when None
    # a fabric name (fabricbench/fabrics); a child gets a custom one by name, its values in its environment
    fabric: str = field(default="default", metadata={**argv_field(fabric=True), **declare(
        "--fabric", "fabric", "The NCCL environment to run under (see `fabricbench fabrics`).")})
    nnodes: int = field(default=1, metadata=declare(  # torchrun pass-through, for several nodes
        "--nnodes", "count", "torchrun pass-through.", lo=1, hi=4096))
    node_rank: int = field(default=0, metadata=declare(
        "--node-rank", "count", "torchrun pass-through.", lo=0, hi=4095))
    master_addr: str = field(default="127.0.0.1", metadata=declare(
        "--master-addr", "text", "torchrun pass-through."))
    master_port: int | None = field(default=None, metadata=declare(  # None: a free port on this host
        "--master-port", "count", "torchrun pass-through.", lo=1, hi=65535, default_by="a free port"))
    # a rank with no progress (start-up phase, step) for this long ends the run; keyed=False (as every time
    # limit): a unit resumed with more time keeps its key
    timeout_s: float = field(default=1800.0, metadata={**argv_field(flag="--timeout", keyed=False), **declare(
        "--timeout", "seconds", "Seconds a rank may go without progress (a step; start-up gets at least 10 "
        "min) before the run ends naming it.", unit="s", concept="progress_timeout_s")})
    # it bounds the nodes' rendezvous too (torchrun's static rendezvous `timeout`)
    stall_timeout_s: float | None = field(default=None, metadata={  # the stall watchdog (jobs/heartbeat.py)
        **argv_field(flag="--stall-timeout", keyed=False), **shared(
            STALL_TIMEOUT, help="Seconds a rank's heartbeat (or every rank's step) may stop before the run ends "
            "naming the rank and its host, on every node.",
            default_by="max(60, 10x the median step)")})  # None: max(60 s, 10 x median step)
    # Library only, no option of the command (a child train never gets them):
    # one strategy's processes, start to end; None: no limit beyond timeout_s
    budget_s: float | None = field(default=None, metadata=argv_field(skip=True, keyed=False))
    # added to the workers' environment
    extra_env: dict[str, str] = field(default_factory=dict, metadata=argv_field(skip=True))

    def __post_init__(self) -> None:
        check(self)  # each declared field inside its declared range, as the CLI checks it (declare.py)
        if isinstance(self.gpus, str):
            object.__setattr__(self, "gpus", tuple(parse_gpus(self.gpus)) if self.gpus.strip() else ())
        else:
            object.__setattr__(self, "gpus", tuple(self.gpus))
        self._check()

    @property
    def procs_per_node(self) -> int:
        if self.device == "cuda":
            return max(self.nprocs or 1, len(self.gpus)) if self.run_backend == "gloo" else len(self.gpus)
        return self.nprocs or CPU_RANKS

    @property
    def local_ranks(self) -> range:
        """The global ranks of this node's processes (torchrun numbers node by node)."""
        first = self.node_rank * self.procs_per_node
        return range(first, first + self.procs_per_node)

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
    def trace_steps_run(self) -> int:
        """The profiled steps this run takes: --trace-steps, else TRACE_STEPS where it has peers, 0 alone."""
        if self.trace_steps is not None:
            return self.trace_steps
        return TRACE_STEPS if self.world_size > 1 else 0

    @property
    def run_precision(self) -> str:
        return self.precision or default_precision(self.device)

    def _check(self) -> None:
        """Everything that can be checked before a rank starts, cross-field checks included. A cuda config
        without GPUs has them decided where it is placed (training/api.py): its checks of the GPU count
        run then, when the placed variant is built."""
        names = STRATEGIES.pick(self.strategies, option="strategies")
        if self.steps < self.warmup_steps + 2:
            raise UsageError(f"--steps {self.steps} with --warmup-steps {self.warmup_steps} leaves "
                             f"{self.steps - self.warmup_steps} timed step(s); need at least 2 (and step 1 is "
                             f"where the sharding is counted)")
        if self.warmup_steps < 1:
            raise UsageError("--warmup-steps must be at least 1: the first step builds state and is not timed")
        estimate.check_sizes(batch_size=self.batch_size, seq_len=self.seq_len, image_size=self.image_size)
        if self.budget_s is not None and not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise UsageError(f"budget_s={self.budget_s}: must be positive and finite (seconds per strategy), "
                             f"or None")
        ds = [s for s in names if STRATEGIES.get(s).engine == "deepspeed"]
        if self.precision == "fp16" and self.device == "cpu" and ds:
            raise UsageError(f"--precision fp16 --device cpu: DeepSpeed's CPU accelerator has no fp16 "
                             f"({', '.join(ds)}); use bf16 or fp32 there")
        if self.device == "cpu" and self.run_backend != "gloo":
            raise UsageError("--backend nccl needs --device cuda; CPU ranks talk over gloo")
        placed = self.device == "cpu" or bool(self.gpus)
        if placed and self.device == "cuda" and self.run_backend == "nccl" and \
                (self.nprocs or 1) > max(1, len(self.gpus)):
            raise UsageError(f"--nprocs {self.nprocs} on {len(self.gpus)} GPU(s): NCCL refuses two ranks on one "
                             f"GPU (\"Duplicate GPU detected\"); add --backend gloo for a lab of several ranks "
                             f"per GPU, or name one GPU per rank with --gpus")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UsageError(f"--max-steps {self.max_steps} is below --steps {self.steps}")
        if self.device == "cpu" and self.procs_per_node < 1:
            raise UsageError(f"--nprocs {self.nprocs}: need at least 1 process")
        if self.device == "cpu":
            check_local_ranks(self.procs_per_node)
        if placed and self.procs_per_node < 1:
            raise UsageError(f"{self.procs_per_node} processes: name GPUs with --gpus or use --nprocs N")
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--nnodes {self.nnodes} --node-rank {self.node_rank}: need nnodes >= 1 and "
                             f"0 <= node-rank < nnodes")
        if not self.master_addr.strip():
            raise UsageError("--master-addr is empty; give the rank-0 host, e.g. 127.0.0.1")
        if self.nnodes > 1 and self.master_port is None:
            raise UsageError(f"--nnodes {self.nnodes}: give --master-port (the same on every node); a free port "
                             f"picked here would differ from node to node")
        given = [x for x in (self.model, self.model_config, self.model_path) if x]
        if len(given) != 1:
            raise UsageError("name exactly one of --model NAME, --model-config FILE, --model-path DIR "
                             f"(got {len(given)}); models: {', '.join(models.MODELS.names())}")
        if self.model:
            models.MODELS.get(self.model)
        get_fabric(self.fabric)  # an unknown fabric fails before any model is built


def require_libraries() -> None:
    """Refuse a run where this Python lacks what a rank imports (the installation, not the config)."""
    missing = [lib for lib in ("accelerate", "transformers") if importlib.util.find_spec(lib) is None]
    if missing:
        raise UsageError(f'train needs {" and ".join(missing)}: pip install "fabricbench[train]"')


def local_devices(config: TrainConfig) -> list[int] | None:
    """The CUDA index (inside CUDA_VISIBLE_DEVICES) of each local rank, where ranks share GPUs; else None."""
    ranks = config.rank_gpus
    if len(set(ranks)) == len(ranks):
        return None
    visible = list(dict.fromkeys(config.gpus))
    return [visible.index(g) for g in ranks]

