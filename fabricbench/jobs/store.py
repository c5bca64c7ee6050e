"""The one resume store: what a results file already holds, read tolerantly, answered by job key.

    from fabricbench.jobs.store import ResumeStore
    store = ResumeStore.open("r.jsonl", key=record_key)     # repairs a torn last line, with a warning
    store.done_ok(key)                                       # the record of that key says "ok"
    store.reusable(key)                                      # ... or "waived": the record, else None
    store.get(key)                                           # the last record written with that key

A process killed while writing leaves its last line cut in half. Appending after it would glue the next
record onto the fragment, and both would be lost; skipping the fragment silently would leave the file
with a line no reader can parse. So opening the store repairs the file first (results.repair.repair,
the one reader of results files: the fragment is cut off, a damaged line further up is moved aside to
FILE.unreadable), says so once per line on stderr, and the measurement the fragment held is not in the
store: it is done again.

sweep, compare, scaling and sweep --fabric key their records by measuring/resume.record_key; study keys
its units by name (studying/runner.py); qualify its units by their job's key (jobs/configs.job_key).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from fabricbench.results import records
from fabricbench.results.repair import repair
from fabricbench.results.status import REUSABLE, Status

OK = Status.OK  # done: not measured again


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def read_repaired(path: str | os.PathLike, *, warn: Callable[[str], None] = _warn) -> list[dict[str, Any]]:
    """Every record of a results file, after the repair (results.repair.repair: a torn last line cut off,
    damaged lines moved aside); one warning per line cut or moved. A file that does not exist holds
    nothing."""
    for w in repair(path):
        warn(w)
    return records.read(path, missing_ok=True).records


@dataclass(kw_only=True)
class ResumeStore:
    """Records of a results file by key; `key(record)` None leaves a record out (not resumable)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    key: Callable[[dict[str, Any]], Hashable | None]
    source: str | None = None
    _by_key: dict[Hashable, dict[str, Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for rec in self.records:
            k = self.key(rec)
            if k is not None:
                self._by_key[k] = rec  # the last one written wins

    @classmethod
    def open(cls, path: str | os.PathLike, *, key: Callable[[dict[str, Any]], Hashable | None],
             keep: Callable[[dict[str, Any]], bool] | None = None,
             warn: Callable[[str], None] = _warn) -> "ResumeStore":
        recs = read_repaired(path, warn=warn)
        if keep is not None:
            recs = [r for r in recs if keep(r)]
        return cls(records=recs, key=key, source=str(path))

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]], *, key) -> "ResumeStore":
        return cls(records=list(records), key=key)

    def get(self, k: Hashable) -> dict[str, Any] | None:
        return self._by_key.get(k)

    def done_ok(self, k: Hashable) -> bool:
        rec = self._by_key.get(k)
        return rec is not None and rec.get("status") == OK

    def reusable(self, k: Hashable) -> dict[str, Any] | None:
        """The record of that key when an earlier run settled it (results/status.REUSABLE: measured, or
        waived here), else None: what --resume keeps rather than running again."""
        rec = self._by_key.get(k)
        return rec if rec is not None and rec.get("status") in REUSABLE else None

    def keys(self) -> list[Hashable]:
        return list(self._by_key)
