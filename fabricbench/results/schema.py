"""The result records. Every record is one flat JSON object that starts with the same header.

Header (every kind): schema, kind, run_id, timestamp, host, fabric, env (allow-listed), versions.
Kinds: "collective" (CollectiveResult below: sweep, compare, scaling), "copy" (p2p matrix),
"train" (strategy runs), "topology" (one snapshot per results file), "plan" (what a run intended).

Changing a field's meaning bumps SCHEMA_VERSION; adding a field does not.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from fabricbench.results.context import allowed_env, fabric_label, host_facts, now_iso

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
    status: str  # "ok", "wrong", "timeout", "waived", "error"
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
    extra: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)  # the header(): schema, kind, host, env, ...

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON record: header first, then the measurement."""
        body = {k: _clean(v) for k, v in dataclasses.asdict(self).items() if k != "context"}
        return {**self.context, **body}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "CollectiveResult":
        names = {f.name for f in dataclasses.fields(cls)} - {"context"}
        body = {k: v for k, v in record.items() if k in names}
        return cls(**body, context={k: v for k, v in record.items() if k not in names})


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
