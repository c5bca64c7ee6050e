"""What a study is: the machine part it uses, the fabrics, the strategies, the model and the train options.

    fabricbench study --gpus 0-3 --model dinov2-base --steps 8 --out run/

StudyConfig validates itself once (validate()), so the CLI and `fabricbench.study(...)` run the same
checks; to_dict/from_dict let `--resume` compare a new command against the plan stored in the directory.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench.errors import UsageError
from fabricbench.fabrics import parse_fabric_list
from fabricbench.gpus import default_gpus
from fabricbench.fabrics.model import shown
from fabricbench.results.context import fabric_label
from fabricbench.sizes import SizeSweep
from fabricbench.training.models import CAUSAL_LM, IMAGE_CLS, MODELS, read_config_json
from fabricbench.training.repeats import MIN_REPEATS
from fabricbench.training.strategies import STRATEGIES

# Sweep grids when no trace says what the strategies send (or the trace ran on one rank): GPUs cover
# DDP's 25 MB buckets up to whole-model gathers; the CPU lab stays small (gloo over loopback is slow).
DEFAULT_SIZES = {"cuda": "1K-1G:x4", "cpu": "4K-1M:x4"}
DEFAULT_ITERS = {"cuda": (20, 5), "cpu": (5, 2)}  # (timed, warm-up) iterations per size
DEFAULT_FABRICS = {"cuda": ("default", "p2p-off"), "cpu": ("default",)}
SWEEP_OPS = ("all_reduce", "all_gather", "reduce_scatter")  # what DDP, ZeRO and FSDP send


@dataclass(kw_only=True)
class StudyConfig:
    out: str  # the study directory: results.jsonl, units/, report.md, report.html
    device: str = "cuda"  # "cuda" (one process per GPU) or "cpu" (gloo ranks, `nprocs` of them)
    gpus: tuple[int, ...] = ()  # CUDA ordinals (device cuda); () = all visible, filled by validate()
    nprocs: int = 2  # ranks on CPU
    fabrics: tuple[str, ...] = ()  # fabric specs; () = DEFAULT_FABRICS[device]; written out masked (to_dict)
    strategies: tuple[str, ...] = ()  # () = every registered strategy
    model: str | None = None  # a registered model name
    model_config: str | None = None  # or a transformers config JSON
    steps: int = 8  # train: steps at least, warm-up included
    warmup_steps: int = 3  # train: untimed first steps
    max_steps: int | None = None  # train: cap on steps while the median's CI exceeds target_ci
    target_ci: float | None = 0.03  # train: steps and repeats go on until the median's 95% CI is within this
    repeats: int | None = None  # train runs per (strategy, fabric), fresh processes, interleaved; None:
    # MIN_REPEATS, then more until the run-to-run CI is within target_ci, at most max_repeats
    max_repeats: int = 5
    repeat_budget_s: float = 1800.0  # no repeat beyond the minimum starts after this many seconds of study
    batch_size: int | None = None  # train: samples per GPU per step; None: 8 on CPU, picked on GPUs (batch.py)
    seq_len: int = 512  # train: tokens per sample (causal LM)
    image_size: int = 224  # train: pixels per side (images)
    precision: str | None = None  # train --precision (None: train's default: bf16 on cuda, fp32 on cpu)
    sizes: str | None = None  # sweep sizes; None: from the strategies' traces, else DEFAULT_SIZES[device]
    iters: int | None = None  # sweep timed iterations per size (None: DEFAULT_ITERS[device])
    warmup: int | None = None  # sweep warm-up iterations per size
    train_timeout_s: float = 1800.0  # one train unit, start to end
    sweep_timeout_s: float = 900.0  # one sweep or scaling unit
    stall_timeout_s: float | None = None  # a unit's rank silent this long ends the unit naming it (train and
    # sweep --stall-timeout; None: their defaults)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes stored with the plan

    def validate(self) -> "StudyConfig":
        """Check everything that can be checked before a unit runs; fill the defaults. Returns self."""
        if self.device not in ("cuda", "cpu"):
            raise UsageError(f"--device {self.device}: choose cuda or cpu")
        if not self.out:
            raise UsageError("--out DIR is required: the study writes results.jsonl and its report there")
        if not self.fabrics:
            self.fabrics = DEFAULT_FABRICS[self.device]
        parse_fabric_list(",".join(self.fabrics))  # unknown or duplicate fabrics fail here
        self.strategies = tuple(STRATEGIES.pick(self.strategies or None, option="strategies"))
        if bool(self.model) == bool(self.model_config):
            raise UsageError("name the model with exactly one of --model NAME or --model-config FILE "
                             "(fabricbench train --list shows the names)")
        if self.model:
            MODELS.get(self.model)
        else:  # the file read and its sizes checked now, so --dry-run says what a run would
            read_config_json(Path(self.model_config))
        if self.target_ci is not None and not 0 < self.target_ci < 1:
            raise UsageError(f"--target-ci {self.target_ci}: a fraction between 0 and 1, e.g. 0.03")
        if self.repeats is not None and not 1 <= self.repeats <= 20:
            raise UsageError(f"--repeats {self.repeats}: 1 to 20 runs per strategy and fabric")
        if not 1 <= self.max_repeats <= 20:
            raise UsageError(f"--max-repeats {self.max_repeats}: 1 to 20")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UsageError(f"--max-steps {self.max_steps} is below --steps {self.steps}")
        if self.batch_size is None and self.device == "cpu":
            self.batch_size = 8
        if self.steps < self.warmup_steps + 2 or self.warmup_steps < 1:
            raise UsageError(f"--steps {self.steps} with --warmup-steps {self.warmup_steps}: need at least 1 "
                             f"warm-up step and 2 timed steps")
        for name in ("batch_size", "seq_len", "image_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be positive")
        if self.iters is None:
            self.iters = DEFAULT_ITERS[self.device][0]
        if self.warmup is None:
            self.warmup = DEFAULT_ITERS[self.device][1]
        if self.iters < 1 or self.warmup < 0:
            raise UsageError(f"--iters {self.iters} / --warmup {self.warmup}: need iters >= 1, warmup >= 0")
        if self.stall_timeout_s is not None and not (isinstance(self.stall_timeout_s, (int, float))
                                                     and math.isfinite(self.stall_timeout_s)
                                                     and 3 <= self.stall_timeout_s <= 86_400):
            raise UsageError(f"--stall-timeout {self.stall_timeout_s}: seconds, 3 to 86400")
        if self.sizes is not None:
            SizeSweep.parse(self.sizes)
        if self.device == "cpu":
            if self.nprocs < 2:
                raise UsageError(f"--nprocs {self.nprocs}: a study compares collectives, which need at least "
                                 f"2 ranks")
            if self.gpus:
                raise UsageError("--gpus does not apply to --device cpu; use --nprocs N")
        else:
            if fabricbench.gpus.visible_gpu_count() == 0:
                raise UsageError("no CUDA GPU is visible here; study the CPU fabric lab instead: --device cpu "
                                 "--nprocs 2 --fabrics default,shaped:1gbit")
            if not self.gpus:
                self.gpus = default_gpus(None)
            else:
                default_gpus(",".join(map(str, self.gpus)))
        return self

    @property
    def rounds(self) -> int:
        """Train runs planned per (strategy, fabric): exactly `repeats`, else up to max_repeats."""
        return self.repeats if self.repeats is not None else self.max_repeats

    @property
    def min_rounds(self) -> int:
        return self.repeats if self.repeats is not None else min(MIN_REPEATS, self.max_repeats)

    @property
    def world_size(self) -> int:
        return self.nprocs if self.device == "cpu" else len(self.gpus)

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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StudyConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("gpus", "fabrics", "strategies"):
            kw[k] = tuple(kw.get(k) or ())
        return cls(**kw)

    def differences(self, other: "StudyConfig") -> list[str]:
        """'field: stored -> new' for each setting that would make other measure something else."""
        ignore = {"out", "extra", "train_timeout_s", "sweep_timeout_s", "repeat_budget_s", "stall_timeout_s"}
        a, b = self.to_dict(), other.to_dict()
        return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in a if k not in ignore and a[k] != b[k]]
