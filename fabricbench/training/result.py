"""What `fabricbench.train` returns: one TrainResult per run, in the order the runs ended.

    t = fabricbench.train(fabricbench.TrainConfig(strategies="ddp,fsdp", model="tiny-mistral", device="cpu"))
    [(r.strategy, r.status, r.steps, r.samples_per_s) for r in t.records]
    t.to_dict()      # the records as `fabricbench train --json` prints them, one dict per run

A module of its own, so that the call (api.py) and the command (cli/train.py) share it without either
importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.results.schema import TrainResult
from fabricbench.results.status import Status


@dataclass(frozen=True, kw_only=True)
class TrainRunResult:
    """The runs of one `train` call: a record per run (a failed run is a record too, never an exception)."""

    records: tuple[TrainResult, ...]  # in the order they ended (rounds interleave the strategies)
    out: str | None = None  # the JSONL file they were appended to, if any

    @property
    def failed(self) -> list[TrainResult]:
        """The runs that did not finish as asked (a dead rank, a crash, a timeout); oom and waived are results."""
        return [r for r in self.records if r.status in (Status.ERROR, Status.TIMEOUT)]

    def to_dict(self) -> list[dict[str, Any]]:
        """The records as the command's --json prints them (one JSON object per line there)."""
        return [r.to_dict() for r in self.records]
