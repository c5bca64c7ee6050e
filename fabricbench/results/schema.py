"""The result records. Every record is one flat JSON object that starts with the same header.

Header (every kind): schema, kind, run_id, timestamp, host, fabric, env (allow-listed), versions.
Kinds and who writes them:
- "collective" (CollectiveResult below): sweep, compare, scaling, study and qualify units;
- "copy": p2p (fabricbench/measuring/copy.py CopyResult);
- "train" (TrainResult below): train, one per strategy;
- "topology": one snapshot per results file;
- "estimate", "relate", "machine", "plan" and "study_unit": fabricbench study (fabricbench/studying/);
  "plan" is the study's config and units, written once per start;
- "qualify_start", "qualify_unit" and "verdict": fabricbench qualify (fabricbench/qualifying/);
(each package declares the fields of the kinds it writes to the reader: results/fields.register_kind)
- "transport": fabricbench import of an NCCL log on its own (fabricbench/importing/nccl_log.py).
`fabricbench import` also writes "collective" (nccl-tests) and "copy" (nvbandwidth) records: they carry
`source` (tool, version, file, run) and leave null what the other tool did not print (op, nranks, bytes...).

Changing a field's meaning bumps SCHEMA_VERSION; adding a field does not.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fabricbench.results.context import allowed_env, fabric_label, host_facts, now_iso
from fabricbench.results.status import Status

SCHEMA_VERSION = 1
SCHEMA = f"fabricbench/{SCHEMA_VERSION}"


def header(kind: str, *, run_id: str, fabric: str = "default") -> dict[str, Any]:
    """The fields every record starts with."""
    return {"schema": SCHEMA, "kind": kind, "run_id": run_id, "timestamp": now_iso(),
            "fabric": fabric_label(fabric), **host_facts(), "env": allowed_env()}


@dataclass(kw_only=True)
class CollectiveResult:
    """One collective at one size: statistics over the timed iterations and the derived bandwidths.

    time_us is the median iteration time (the headline); each iteration's time is the slowest GPU's
    (rule in `timing_rule`). algbw = bytes / time (decimal GB/s); busbw = algbw x busbw_factor.
    """

    op: str
    dtype: str
    bytes: int  # S actually moved, after rounding (see fabricbench/collectives/base.py)
    requested_bytes: int
    count: int  # S / element size
    nranks: int
    gpus: list[int]  # device ordinals, in rank order (per host for multi-process runs)
    inplace: bool
    graph: bool
    iters: int  # timed samples taken
    time_us: float | None  # median
    mean_us: float | None
    min_us: float | None
    max_us: float | None
    p95_us: float | None
    cv: float | None  # stdev / mean
    ci95_rel: float | None  # half-width of the median's 95% confidence interval / median
    algbw_gbps: float | None
    busbw_gbps: float | None
    busbw_factor: float
    busbw_note: str | None  # e.g. "n = 1: busbw factor is 0, busbw not meaningful"
    wrong: int | None  # elements differing from the exact result; None when not checked
    status: Status  # KIND_STATUSES["collective"]
    message: str | None = None  # why, when status is not "ok"
    engine: str
    backend: str | None = None
    timing_rule: str = "slowest GPU per iteration"
    nccl_version: str | None = None
    nccl_library: str | None = None
    cuda_driver: str | None = None
    cuda_runtime: str | None = None
    gpu_names: list[str] = field(default_factory=list)
    transport: str | None = None  # what NCCL actually used (filled where the NCCL log was read)
    nvls: bool | None = None  # NVLink SHARP connected, where NCCL's log was read (fabric runs, imports)
    # NCCL's algorithm and protocol where known: NCCL_ALGO / NCCL_PROTO in force for the run (the user's or
    # a fabric's). None: NCCL chose per size and per call, which no record can know without its tuner log.
    nccl_algo: str | None = None
    nccl_proto: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)  # the header(): schema, kind, host, env, ...

    KIND: ClassVar[str] = "collective"

    @property
    def fabric(self) -> str:
        """The fabric it ran on, by name (a header field, in `context`); "default" where none is named."""
        return self.context.get("fabric") or "default"

    # Written onto the record after to_dict, so kept in `context` (as fields they would write a null into
    # every record): the fabric's facts (studying/runner.py) and the mismatch flag (measuring/child.annotate);
    # the study's tag too (study/kinds.unit_of reads it). Their types are checked by the reader
    # (results/fields.py).
    @property
    def fabric_env(self) -> dict[str, Any] | None:
        """The fabric's variables (masked outside NCCL_/GLOO_/CUDA_); None in records from before facts."""
        return self.context.get("fabric_env")

    @property
    def shaped_rate_bps(self) -> float | None:
        return self.context.get("shaped_rate_bps")

    @property
    def netns(self) -> str | None:
        """The network namespace a shaped fabric ran in."""
        return self.context.get("netns")

    @property
    def transport_mismatch(self) -> str | None:
        """Why the transport NCCL used is not the one the fabric asked for; None when it is (or unread)."""
        return self.context.get("transport_mismatch")

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON record: header first, then the measurement."""
        body = {k: _clean(v) for k, v in dataclasses.asdict(self).items() if k != "context"}
        return {**self.context, **body}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "CollectiveResult":
        names = {f.name for f in dataclasses.fields(cls)} - {"context"}
        body = {k: v for k, v in record.items() if k in names}
        return cls(**body, context={k: v for k, v in record.items() if k not in names})

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "CollectiveResult":
        """A record the shared reader passed (results/records.py checked its field types and status) as a
        CollectiveResult: a field an older writer or an imported tool left out is None, the status the
        enum. Writing it back (to_dict) gives those fields as null."""
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        res = cls.from_dict({**dict.fromkeys(required), **record})
        res.status = Status(res.status)
        res.extra = res.extra or {}  # null (an imported record's) reads as no extras
        return res


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class _Unset:
    """A train record key the run never reached: left out of the record, not written as null."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(kw_only=True)
class TrainResult:
    """One strategy's training run (kind "train"): what ran, how it went, and what it measured.

    Built once per strategy by fabricbench/training/launch.py and turned into the flat record once, by
    to_dict(), when it is written. The setting fields are in every record; the outcome fields are UNSET
    (absent from the record) where the run did not get that far (a waived strategy has no memory, a
    rank that died has no verification). Keys this class does not name are kept in `extra` and written
    back as they came, so a record read with from_dict and written again loses nothing.
    """

    # what ran
    strategy: str  # a name in fabricbench.training.strategies.STRATEGIES
    model: str
    task: str  # "causal-lm" or "image-cls"
    params: int  # Ψ
    batch_size: int  # per rank per step
    global_batch: int  # batch_size x ranks
    seq_len: int | None  # causal LM only
    image_size: int | None  # image classification only
    tokens_per_sample: int
    device: str  # "cuda" or "cpu"
    gpus: list[int]
    nranks: int
    nnodes: int
    steps: int  # warm-up included
    warmup_steps: int
    lr: float
    optimizer: str
    precision: str = UNSET  # "bf16", "fp16" or "fp32" (the compute precision); UNSET in records before it
    mixed_precision: str = UNSET  # what Accelerate was given ("bf16", "fp16", "no")
    dataset: str = "synthetic"  # a local folder, or synthetic data
    estimate: dict[str, Any] = field(default_factory=dict)  # the recipe's bytes per GPU (training/estimate.py)
    versions: dict[str, Any] = field(default_factory=dict)
    fabric_env: Any = UNSET  # the fabric's variables (masked outside NCCL_/GLOO_/CUDA_)
    shaped_rate_bps: Any = UNSET
    # how it went
    status: Status = Status.OK  # KIND_STATUSES["train"]
    message: str | None = None  # why, when status is not "ok"
    launcher_rc: Any = UNSET  # torchrun's exit status; None when it was killed at --timeout
    rank_died: Any = UNSET  # the rank that ended the run early
    steps_completed: Any = UNSET  # steps every rank finished, when the run ended early
    # what it measured
    memory: Any = UNSET  # peak allocated/reserved bytes per rank and their maxima
    engine: Any = UNSET  # the wrapper found after prepare: "ddp", "deepspeed", "fsdp"
    zero_stage: Any = UNSET
    wrapper: Any = UNSET
    model_impl: Any = UNSET  # who built the model: "fabricbench" (training/native.py) or "transformers"
    world_size: Any = UNSET
    accelerate_num_processes: Any = UNSET
    distributed_type: Any = UNSET
    gpu_name: Any = UNSET
    holdings: Any = UNSET  # numel each rank held of params, grads, optimizer states
    held_fraction: Any = UNSET
    step_time: Any = UNSET  # median_s, mean_s, p95_s, cv of the timed steps (statistics/figures.py)
    step_times_s: Any = UNSET  # every step, slowest rank
    throughput: Any = UNSET  # samples/s, tokens/s, MFU (training/metrics.py)
    comm: Any = UNSET  # the communication trace (training/trace.py), dict or None
    first_loss: Any = UNSET
    last_loss: Any = UNSET
    losses: Any = UNSET
    loss_decreased: Any = UNSET
    gpu_busy_fraction: Any = UNSET  # kernel time / step time in the profiled steps (launch._busy); None off GPU
    phases: Any = UNSET  # seconds per phase of the run, start-up to teardown (training/phases.py)
    extra: dict[str, Any] = field(default_factory=dict)  # keys not named above, kept as they came
    context: dict[str, Any] = field(default_factory=dict)  # the header(): schema, kind, host, env, ...

    KIND: ClassVar[str] = "train"

    @property
    def fabric(self) -> str:
        """The fabric it ran on, by name (a header field, in `context`); "default" where none is named."""
        return self.context.get("fabric") or "default"

    def reached(self, name: str) -> Any:
        """A field's value, or None where the run never got that far (UNSET: absent from the record)."""
        v = getattr(self, name)
        return None if v is UNSET else v

    @property
    def samples_per_s(self) -> float | None:
        """The run's throughput, where it timed steps; None otherwise."""
        return (self.reached("throughput") or {}).get("samples_per_s")

    @property
    def median_step_s(self) -> float | None:
        """The run's median step time, where it timed a (positive) step; None otherwise."""
        v = (self.reached("step_time") or {}).get("median_s")
        return v if v is not None and v > 0 else None

    @property
    def netns(self) -> str | None:
        """The network namespace a shaped fabric ran in (studying/runner.py adds it after to_dict: in `extra`)."""
        return self.extra.get("netns")

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON record: header first, then every field that was reached, then `extra`."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("extra", "context") and getattr(self, f.name) is not UNSET}
        return {**self.context, **body, **self.extra}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "TrainResult":
        """A record (or a record body) -> TrainResult; header keys go to `context`, unknown ones to `extra`."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "context"}
        head = {"schema", "kind", "run_id", "timestamp", "fabric", "env", *host_facts()}
        body = {k: v for k, v in record.items() if k in names}
        context = {k: v for k, v in record.items() if k in head and k not in names}
        extra = {k: v for k, v in record.items() if k not in names and k not in head}
        return cls(**body, context=context, extra=extra)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "TrainResult":
        """A record the shared reader passed (results/records.py) as a TrainResult: a setting an older
        writer left out is None, the status the enum."""
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        res = cls.from_dict({**dict.fromkeys(required), **record})
        res.status = Status(res.status)
        return res
