"""What a study is: the machine part it uses, the fabrics, the strategies, the model and the train options.

    fabricbench study --gpus 0-3 --model dinov2-base --steps 8 --out run/

StudyConfig is frozen and checks itself when built (__post_init__, cross-field checks included, its defaults
filled), so the CLI and `fabricbench.study(...)` hold the same checked config; a variant is
dataclasses.replace, which checks it again. What only this machine can say (its cores, its GPUs, the --out
folder, a model config file) is checked by the call (studying/api.py `placed`), so a stored study's config
is read back anywhere. to_dict/from_dict let `--resume` compare a new command against the plan stored in
the directory.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare, of, shared
from fabricbench.errors import UsageError
from fabricbench.jobs.heartbeat import STALL_TIMEOUT
from fabricbench.fabrics import parse_fabric_list, split_fabric_list
from fabricbench.gpus import parse_gpus
from fabricbench.fabrics.model import shown
from fabricbench.results.context import fabric_label
from fabricbench.sizes import SizeSweep
from fabricbench.measuring.config import SweepConfig
from fabricbench.training.config import TrainConfig
from fabricbench.training.models import CAUSAL_LM, IMAGE_CLS, MODELS
from fabricbench.training.repeats import DEFAULT_MAX_REPEATS, MIN_REPEATS
from fabricbench.training.strategies import STRATEGIES

# Sweep grids when no trace says what the strategies send (or the trace ran on one rank): GPUs cover
# DDP's 25 MB buckets up to whole-model gathers; the CPU lab stays small (gloo over loopback is slow).
DEFAULT_SIZES = {"cuda": "1K-1G:x4", "cpu": "4K-1M:x4"}
DEFAULT_ITERS = {"cuda": (20, 5), "cpu": (5, 2)}  # (timed, warm-up) iterations per size
DEFAULT_FABRICS = {"cuda": ("default", "p2p-off"), "cpu": ("default",)}
SWEEP_OPS = ("all_reduce", "all_gather", "reduce_scatter")  # what DDP, ZeRO and FSDP send


# Settings that measure nothing (where the nodes meet, how long they wait, the budgets): a --resume may
# change them; and RESUMABLE, those a `study --out DIR --resume` given alone applies over the stored ones
# (max_repeats only upward: the rounds an undecided comparison asked for).
UNMEASURED = frozenset({"out", "extra", "trace_rounds", "train_timeout_s", "sweep_timeout_s", "repeat_budget_s",
                        "stall_timeout_s", "node_rank", "master_addr", "master_port", "join_timeout_s"})
RESUMABLE = UNMEASURED - {"out", "extra"} | {"max_repeats"}


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    out: str = field(metadata=declare(  # the study directory: results.jsonl, units/, report.md, report.html
        "--out", "output folder", "Study directory: results.jsonl, units/, report.md, report.html."))
    device: str = field(default="cuda", metadata=shared(  # "cuda" (one process per GPU) or "cpu" (gloo ranks,
        of(TrainConfig, "device")))  # `nprocs` of them)
    gpus: tuple[int, ...] = field(default=(), metadata=shared(  # CUDA ordinals (device cuda); () = all
        of(SweepConfig, "gpus"), help="GPUs to study, e.g. 0-3."))  # visible, filled where it is placed
    nprocs: int = field(default=2, metadata=shared(  # ranks on CPU
        of(TrainConfig, "nprocs"), help="Ranks with --device cpu (gloo).", default_by=None))
    fabrics: tuple[str, ...] = field(default=(), metadata=declare(  # fabric specs; () = DEFAULT_FABRICS[device];
        "--fabrics", "fabric list", "Comma list of fabrics; shaped:RATE on CPU.",
        default_by="default,p2p-off on GPUs, default on CPU"))  # written out masked (to_dict)
    strategies: tuple[str, ...] = field(default=(), metadata=shared(  # () = every registered strategy
        of(TrainConfig, "strategies"), aliases=()))
    # the train options: train's declarations (training/config.py), shared, so one range and one default
    model: str | None = field(default=None, metadata=shared(of(TrainConfig, "model")))  # a registered name
    model_config: str | None = field(default=None, metadata=shared(  # or a transformers config JSON
        of(TrainConfig, "model_config")))
    steps: int = field(default=8, metadata=shared(of(TrainConfig, "steps")))  # steps, warm-up included
    warmup_steps: int = field(default=3, metadata=shared(of(TrainConfig, "warmup_steps")))
    max_steps: int | None = field(default=None, metadata=shared(of(TrainConfig, "max_steps")))
    target_ci: float | None = field(default=0.03, metadata=shared(  # steps and repeats go on until the
        of(TrainConfig, "target_ci")))  # median's 95% CI is within this
    repeats: int | None = field(default=None, metadata=shared(  # train runs per (strategy, fabric), fresh
        of(TrainConfig, "repeats"), help="Runs of each strategy on each fabric in fresh processes."))
    # processes, interleaved; None: MIN_REPEATS, then more while a comparison is undecided or a CI is wider
    # than target_ci, at most max_repeats
    max_repeats: int = field(default=DEFAULT_MAX_REPEATS, metadata=shared(of(TrainConfig, "max_repeats"),
                                                        help="Cap on runs per strategy and fabric."))
    repeat_budget_s: float = field(default=1800.0, metadata=shared(  # no repeat beyond the minimum starts
        of(TrainConfig, "time_budget_s"), concept=None, aliases=()))  # after this many seconds of study
    margin: float = field(default=0.02, metadata=shared(  # δ: a comparison within ±margin is "equivalent"
        of(TrainConfig, "margin")))  # statistics/comparison.py
    batch_size: int | None = field(default=None, metadata=shared(  # samples per GPU per step; None: 8
        of(TrainConfig, "batch_size"),
        default_by="8 on CPU; on GPUs the study picks it, doubling while it pays"))  # on CPU, picked on GPUs
    seq_len: int = field(default=512, metadata=shared(of(TrainConfig, "seq_len")))  # causal LM
    image_size: int = field(default=224, metadata=shared(of(TrainConfig, "image_size")))  # images
    precision: str | None = field(default=None, metadata=shared(  # None: train's default: bf16 on cuda,
        of(TrainConfig, "precision")))  # fp32 on cpu
    # Profiling is fixed cost, not measurement (a median 2.6 s of a 1B model's 8-14 s runs on one H100, more than
    # their timed steps): the first rounds give each (strategy, fabric) its communication trace and relate its
    # calls' spread, and later rounds, run only to decide a comparison, time steps alone
    trace_rounds: int = field(default=2, metadata=declare(
        "--trace-rounds", "count", "Rounds whose train runs are profiled for the communication trace (0: none).",
        lo=0, hi=1000))
    sizes: str | None = field(default=None, metadata=declare(  # sweep sizes; None: from the strategies'
        "--sizes", "size list", "Sweep sizes.", default_by="covering what the traces sent"))  # traces
    iters: int | None = field(default=None, metadata=shared(  # sweep timed iterations per size
        of(SweepConfig, "iters"), help="Sweep timed iterations per size.",
        default_by="GPU 20, CPU 5"))  # (None: DEFAULT_ITERS[device])
    warmup: int | None = field(default=None, metadata=shared(  # sweep warm-up iterations per size
        of(SweepConfig, "warmup"), help="Sweep warm-up iterations per size.", default_by="GPU 5, CPU 2"))
    train_timeout_s: float = field(default=1800.0, metadata=declare(  # one train unit, start to end
        "--train-timeout", "seconds", "Seconds one train unit may take.", unit="s"))
    sweep_timeout_s: float = field(default=900.0, metadata=declare(  # one sweep or scaling unit
        "--sweep-timeout", "seconds", "Seconds one sweep unit may take.", unit="s"))
    stall_timeout_s: float | None = field(default=None, metadata=shared(  # a unit's rank silent this long ends
        STALL_TIMEOUT, help="Seconds a unit's rank may stop (SIGSTOP, a dead node) before the unit ends naming it.",
        default_by="train's and sweep's own"))  # it (train and sweep
    # --stall-timeout; None: their defaults)
    # across nodes (studying/nodes.py): node 0 runs the study, the others follow it; the flags as train's
    nnodes: int = field(default=1, metadata=shared(of(TrainConfig, "nnodes"), help=(
        "Nodes the study spans (the same study command on each, with its --node-rank).")))
    node_rank: int = field(default=0, metadata=shared(of(TrainConfig, "node_rank"), help=(
        "This node's index: 0 runs the study and writes --out, the others follow it.")))
    master_addr: str = field(default="127.0.0.1", metadata=shared(
        of(TrainConfig, "master_addr"), help="Node 0's address, where the nodes meet."))
    master_port: int | None = field(default=None, metadata=declare(  # the study's store; units use the next port
        "--master-port", "count", "Node 0's port for the study (its units use the next one).", lo=1, hi=65534,
        default_by="required with --nnodes above 1"))
    join_timeout_s: float = field(default=300.0, metadata=declare(  # every node at the study's start, and
        "--join-timeout", "seconds", "Seconds every node has to join the study (and each unit's rendezvous).",
        lo=1, hi=86_400, unit="s"))  # each spanning unit's rendezvous
    # continue the study in `out`, skipping the units recorded ok; how this run treats the folder, not what
    # the study measures: never stored with the plan (to_dict)
    resume: bool = field(default=False, metadata=declare(
        "--resume", "flag", "Continue the study in --out: skip the units recorded ok."))
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes stored with the plan

    def __post_init__(self) -> None:
        self._lists()
        check(self)  # each declared field inside its declared range, as the CLI checks it (declare.py)
        self._check()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)  # frozen: only __post_init__ fills a field

    def _lists(self) -> None:
        """The list fields as tuples, from text as the CLI gives them or from any sequence: gpus "0-3",
        fabrics "default,x:A=1,B=2" (x:A=1,B=2 is one fabric, not two), strategies "ddp,fsdp"."""
        if isinstance(self.fabrics, str):
            self._set(fabrics=tuple(split_fabric_list(self.fabrics)))
        if isinstance(self.strategies, str):
            self._set(strategies=tuple(x.strip() for x in self.strategies.split(",") if x.strip()))
        if isinstance(self.gpus, str) or (self.gpus and isinstance(self.gpus[0], str)):
            self._set(gpus=parse_gpus(self.gpus if isinstance(self.gpus, str) else ",".join(self.gpus)))
        self._set(**{k: tuple(v) if v is not None else v
                     for k, v in (("gpus", self.gpus), ("fabrics", self.fabrics), ("strategies", self.strategies))})

    def _check(self) -> None:
        """Everything that can be checked from the config alone, cross-field checks included; fills the
        defaults that depend on other fields. The machine's part (cores, GPUs, --out, a model config
        file) is the call's: studying/api.py placed()."""
        if not self.out:
            raise UsageError("--out DIR is required: the study writes results.jsonl and its report there")
        if not self.fabrics:
            self._set(fabrics=DEFAULT_FABRICS[self.device])
        parse_fabric_list(",".join(self.fabrics))  # unknown or duplicate fabrics fail here
        self._set(strategies=tuple(STRATEGIES.pick(self.strategies or None, option="strategies")))
        if bool(self.model) == bool(self.model_config):
            raise UsageError("name the model with exactly one of --model NAME or --model-config FILE "
                             "(fabricbench train --list shows the names)")
        if self.model:
            MODELS.get(self.model)
        if self.target_ci == 0:  # --target-ci 0: the precision floor off (a None would read as "not given")
            self._set(target_ci=None)
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UsageError(f"--max-steps {self.max_steps} is below --steps {self.steps}")
        if self.batch_size is None and self.device == "cpu":
            self._set(batch_size=8)
        if self.steps < self.warmup_steps + 2 or self.warmup_steps < 1:
            raise UsageError(f"--steps {self.steps} with --warmup-steps {self.warmup_steps}: need at least 1 "
                             f"warm-up step and 2 timed steps")
        if self.iters is None:
            self._set(iters=DEFAULT_ITERS[self.device][0])
        if self.warmup is None:
            self._set(warmup=DEFAULT_ITERS[self.device][1])
        if self.sizes is not None:
            SizeSweep.parse(self.sizes)
        self._check_nodes()
        if self.device == "cpu":
            if self.nprocs < 1 or self.nprocs * self.nnodes < 2:  # 2 nodes of 1 rank make 2 ranks
                raise UsageError(f"--nprocs {self.nprocs}: a study compares collectives, which need at least "
                                 f"2 ranks in all (--nprocs 2, or --nnodes 2 with one rank each)")
            if self.gpus:
                raise UsageError("--gpus does not apply to --device cpu; use --nprocs N")

    def _check_nodes(self) -> None:
        if not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--nnodes {self.nnodes} --node-rank {self.node_rank}: need 1 <= nnodes and "
                             f"0 <= node-rank < nnodes")
        if self.nnodes == 1:
            return
        if self.master_port is None or not 1 <= self.master_port <= 65534:
            raise UsageError(f"--nnodes {self.nnodes}: give --master-port P, the same on every node (1-65534; "
                             f"the study meets on P, its units on P+1)")
        if not str(self.master_addr).strip():
            raise UsageError("--master-addr: give node 0's address, the same on every node")
        shaped = [n for n in self.fabric_names if n.startswith("shaped:")]
        if shaped:  # tc shapes one node's loopback; between nodes the wire itself is the fabric
            raise UsageError(f"--fabrics {','.join(shaped)}: a shaped fabric limits one node's loopback, not the "
                             f"link between nodes; across nodes study default or NCCL fabrics")

    @property
    def ranks_per_node(self) -> int:
        return self.nprocs if self.device == "cpu" else len(self.gpus)

    @property
    def rounds(self) -> int:
        """Train runs planned per (strategy, fabric): exactly `repeats`, else up to max_repeats."""
        return self.repeats if self.repeats is not None else self.max_repeats

    @property
    def min_rounds(self) -> int:
        return self.repeats if self.repeats is not None else min(MIN_REPEATS, self.max_repeats)

    @property
    def looks(self) -> dict[str, int]:
        """The sequential rule's looks (statistics/comparison.py): from the third round up to the most rounds the
        study may run; with --repeats N, one look at N (nobody peeks)."""
        if self.repeats is not None:
            return {"first_look": self.repeats, "last_look": self.repeats}
        return {"first_look": min(MIN_REPEATS, self.max_repeats), "last_look": self.max_repeats}

    @property
    def world_size(self) -> int:
        """Ranks in all: those of one node times the nodes (every node brings the same count)."""
        return self.ranks_per_node * self.nnodes

    @property
    def shape(self) -> dict[str, int]:
        """The input-shape settings the model reads: seq_len for a causal LM, image_size for an image
        model; both for a --model-config, whose task only transformers can tell (train ignores the other)."""
        task = MODELS.get(self.model).task if self.model else None
        out = {}
        if task != IMAGE_CLS:
            out["seq_len"] = self.seq_len
        if task != CAUSAL_LM:
            out["image_size"] = self.image_size
        return out

    @property
    def shape_args(self) -> list[str]:
        """`shape` as options (the command that reruns the study shows them)."""
        return [a for k, v in self.shape.items() for a in (f"--{k.replace('_', '-')}", str(v))]

    @property
    def model_label(self) -> str:
        return self.model or str(self.model_config)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        del d["resume"]  # how this run treats its folder: a stored plan says what the study measures
        # fabrics masked: a custom fabric's values outside NCCL_*/GLOO_*/CUDA_* never reach a file or screen
        d["gpus"], d["fabrics"], d["strategies"] = list(self.gpus), list(self.fabrics_shown), list(self.strategies)
        return d

    @property
    def fabrics_shown(self) -> tuple[str, ...]:
        """The fabric specs as a screen or file may show them: custom values masked."""
        return tuple(shown(f) for f in self.fabrics)

    @property
    def fabric_names(self) -> tuple[str, ...]:
        """What units, file names, child argv and the report call each fabric (fabrics.Fabric.name)."""
        return tuple(fabric_label(f) for f in self.fabrics)

    def labelled(self) -> "StudyConfig":
        """This config with each fabric by its name, as records and the report name them: a view to read
        a stored study by, never one to run (a custom fabric's name alone is no spec here, so it is not
        checked again as a dataclasses.replace would)."""
        view = copy.copy(self)
        object.__setattr__(view, "fabrics", self.fabric_names)
        return view

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StudyConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("gpus", "fabrics", "strategies"):
            kw[k] = tuple(kw.get(k) or ())
        return cls(**kw)

    def differences(self, other: "StudyConfig") -> list[str]:
        """'field: stored -> new' for each setting that would make other measure something else."""
        ignore = UNMEASURED
        a, b = self.to_dict(), other.to_dict()
        # more rounds (and more budget, ignored above) add the rounds a study asked for ("about 15 rounds
        # would settle it") and change nothing measured; fewer would drop rounds already run
        more = a.get("max_repeats") is not None and b.get("max_repeats") is not None and b["max_repeats"] > a["max_repeats"]
        return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in a
                if k not in ignore and a[k] != b[k] and not (k == "max_repeats" and more)]
