"""Run one measuring child (`fabricbench sweep|p2p|train`) with a wall-clock limit and read its records.

    fabricbench qualify --spec node.toml --out q/      (each measuring unit is one call here)

Sweeps go through measuring/child.run_child, which applies the fabric (its environment; a shaped network
namespace for `shaped:RATE`), streams each record back as the child writes it, and reads the transport
from NCCL's log. A fabric that cannot be applied here (no root, no netns) comes back waived with the
reason, never as a failure. Every child runs as a job (fabricbench/jobs): nothing outlives qualify.
A unit's outcome is a UnitResult (defined here, so that context.py, which starts the units, imports
this module at its top).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench import jobs
from fabricbench.fabrics import get_fabric
from fabricbench.jobs.configs import child_command, environment
from fabricbench.measuring.child import run_child
from fabricbench.measuring.config import SweepConfig
from fabricbench.results.status import Status


@dataclass(kw_only=True)
class UnitResult:
    key: str
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # the unit could not measure (child failed, timed out)
    waived: str | None = None  # the unit cannot run here (e.g. a shaped fabric without root)
    transport: str | None = None
    mismatch: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    reused: bool = False  # closed by an earlier run of the same --out (--resume)
    streamed: bool = False  # its records were written to the results file as they arrived

    @property
    def status(self) -> Status:
        """error: it could not measure (--resume runs it again); waived: it cannot run here; else ok."""
        return Status.ERROR if self.error else Status.WAIVED if self.waived else Status.OK

    def to_record(self) -> dict[str, Any]:
        return {"key": self.key, "status": self.status, "error": self.error, "waived": self.waived,
                "transport": self.transport, "transport_mismatch": self.mismatch, "facts": self.facts,
                "nrecords": len(self.records)}



def _last_error(stderr: str) -> str | None:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("Error") or "Error:" in ln]
    return (errs or lines or [None])[-1]


def _only_wrong(records: list[dict[str, Any]]) -> bool:
    """A --check sweep that found wrong elements exits non-zero after writing everything: that is a
    measurement (correctness judges it), not a failure to measure."""
    return any(r.get("status") == Status.WRONG for r in records)


def sweep_under(fabric_name: str, sweep: SweepConfig, *, key: str, wall_timeout_s: float,
                on_record: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> UnitResult:
    """One child sweep under the fabric (run_child names it, --out and --quiet: SweepDelivery); `on_record`
    sees (and may replace) each record as it arrives."""
    fabric = get_fabric(fabric_name)
    kept: list[dict[str, Any]] = []

    def stream(rec: dict[str, Any]) -> None:
        kept.append(on_record(rec) if on_record is not None else rec)

    run = run_child(fabric, sweep, wall_timeout_s=wall_timeout_s, on_record=stream)
    if run.waived:
        return UnitResult(key=key, waived=run.waived, streamed=True)
    error = run.error if run.error and not (kept and _only_wrong(kept)) else None
    facts = {}
    if kept:
        ex = kept[0].get("extra") or {}
        facts = {k: kept[0].get(k, ex.get(k)) for k in ("shaped_rate_bps", "netns") if
                 kept[0].get(k, ex.get(k)) is not None}
    return UnitResult(key=key, records=kept, error=error, transport=run.transport, mismatch=run.mismatch,
                      facts=facts, streamed=True)


def run_command(job: Any, *, key: str, kind: str, wall_timeout_s: float) -> UnitResult:
    """A typed config that names its program (training's TrainConfig, measuring's P2PConfig: `fabricbench
    train|p2p ... --out tmp`) as a child (fabricbench/jobs: its own process group dead with us, a private workspace removed
    on every exit; a custom fabric by name in its argv, its values in its environment); its records of `kind`
    come back as they are written."""
    with jobs.workspace("qualify") as ws:
        out = ws / "out.jsonl"
        res = jobs.run([*child_command(job), "--out", str(out)], workspace=ws,
                       env=environment(getattr(job, "fabric", None)), budget_s=wall_timeout_s, records_from=[out])
    records = [r for r in res.records if r.get("kind") == kind]
    if res.timed_out:
        return UnitResult(key=key, records=records, error=f"did not finish within {wall_timeout_s:g} s")
    if res.returncode:
        return UnitResult(key=key, records=records,
                          error=_last_error(res.stderr or "") or f"exit status {res.returncode}")
    return UnitResult(key=key, records=records)
