"""Two imported record kinds about a node's health rather than its speed: `health` (NCCL RAS) and `diag` (DCGM).

    fabricbench import ncclras.json dcgm_diag.json --out node.jsonl
    fabricbench qualify --spec builtin:h200-sxm-8 --from node.jsonl     (each folds into the node's verdicts)

- health: one communicator as NCCL's RAS saw it: its size, the ranks that reported, and `findings`, each
  {kind: missing | unresponsive | dead | mismatch | error | incomplete | timeout, nccl: [NCCL's own words:
  unresponsive, dead, incomplete, mismatch, timeout, error], detail, ranks: [{rank, host, pid, gpu,
  nccl_status}], counts: {value: ranks}}; `healthy` is true when there is no finding. `check` is "ncclras",
  or "nccl-diag" for NCCL_RUN_DIAGNOSTICS' report (kind p2p | net_bw | diag, with `figures`).
- diag: one DCGM diagnostic test on one entity (a GPU, a switch): its `result` (pass, fail, warn, skip,
  not run), DCGM's `errors` [{error_id, category, severity, message}] and `figures` read from its info lines.
Both are written by fabricbench/importing (nccl_ras.py, dcgm_diag.py) and read typed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

RESULTS = ("pass", "fail", "warn", "skip", "not run")


@dataclass(kw_only=True)
class HealthRecord:
    check: str  # "nccl-ras"
    healthy: bool
    comm_hash: str | None = None  # None: a finding about the whole job (a process that sent no data)
    nranks: int | None = None  # ranks in the communicator
    ranks_reporting: int | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    nccl_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)

    KIND: ClassVar[str] = "health"

    def to_dict(self) -> dict[str, Any]:
        body = {k: getattr(self, k) for k in ("check", "healthy", "comm_hash", "nranks", "ranks_reporting",
                                              "findings", "nccl_version", "extra")}
        return {**self.context, "kind": self.KIND, **body}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "HealthRecord":
        names = ("check", "healthy", "comm_hash", "nranks", "ranks_reporting", "findings", "nccl_version", "extra")
        return cls(**{k: rec[k] for k in names if rec.get(k) is not None},
                   context={k: v for k, v in rec.items() if k not in names})


@dataclass(kw_only=True)
class DiagRecord:
    test: str
    result: str  # one of RESULTS
    category: str | None = None  # DCGM's test category (Deployment, Hardware, Integration, ...)
    entity_group: str | None = None  # "GPU", "NvSwitch", ...
    entity_id: int | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)  # {name, value, unit} read from info lines
    dcgm_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)

    KIND: ClassVar[str] = "diag"

    def to_dict(self) -> dict[str, Any]:
        body = {k: getattr(self, k) for k in ("test", "result", "category", "entity_group", "entity_id", "errors",
                                              "info", "figures", "dcgm_version", "extra")}
        return {**self.context, "kind": self.KIND, **body}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "DiagRecord":
        names = ("test", "result", "category", "entity_group", "entity_id", "errors", "info", "figures",
                 "dcgm_version", "extra")
        return cls(**{k: rec[k] for k in names if rec.get(k) is not None},
                   context={k: v for k, v in rec.items() if k not in names})
