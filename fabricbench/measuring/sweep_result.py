"""What `fabricbench.sweep` returns: one CollectiveResult per measurement, in plan order.

    r = fabricbench.sweep(fabricbench.SweepConfig(engine="torch", backend="gloo", nprocs=2, sizes="1K-1M"))
    [(x.op, x.bytes, x.busbw_gbps) for x in r.records]
    r.to_dict()      # the records as `fabricbench sweep --json` prints them, one dict per measurement

A module of its own, so that the call (api.py), compare and the command share it without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    """The measurements of one `sweep` call (waived ones included, as rows that say why)."""

    records: list[CollectiveResult]  # in plan order; with resume, the reused ones among the new
    out: str | None = None  # the JSONL file they were appended to, if any

    @property
    def wrong(self) -> list[CollectiveResult]:
        """The measurements whose --check found wrong elements (the command exits 1 on them)."""
        return [r for r in self.records if r.status == Status.WRONG]

    def to_dict(self) -> list[dict[str, Any]]:
        """The records as the command's --json prints them (one JSON object per line there)."""
        return [r.to_dict() for r in self.records]
