"""The one resume store: what a results file already holds, read tolerantly, answered by job key.

    from fabricbench.jobs.store import ResumeStore
    store = ResumeStore.open("r.jsonl", key=record_key)     # repairs a torn last line, with a warning
    store.done_ok(key)                                       # the record of that key says "ok"
    store.get(key)                                           # the last record written with that key

A process killed while writing leaves its last line cut in half. Appending after it would glue the next
record onto the fragment, and both would be lost; skipping the fragment silently would leave the file
with a line no reader can parse. So opening the store cuts the fragment off (the file is rewritten up to
the last complete line, so every line parses), says so once on stderr, and the measurement it held is
not in the store: it is done again. A line that does not parse anywhere else is not a crash's doing:
that file is refused (UsageError naming the line) rather than rewritten.

sweep, compare, scaling and sweep --fabric key their records by measuring/resume.record_key; study keys
its units by name (study/runner.py); qualify its units by their key (qualifying/context.py).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable

from fabricbench.errors import UsageError

OK = "ok"


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def repair(path: str | os.PathLike, *, warn: Callable[[str], None] = _warn) -> list[dict[str, Any]]:
    """Every record of a JSONL results file, after cutting off a torn last line (see the docstring).
    A file that does not exist holds nothing."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}; check the path given as the results file")
    records: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    good_end = 0  # bytes up to and including the last line that parses
    pos = 0
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        end = pos + len(line) + (0 if last else 1)
        if line.strip():
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError("not an object")
            except ValueError:
                if not (last or (i == len(lines) - 2 and not lines[-1].strip())):
                    raise UsageError(f"{path}: line {i + 1} is not a JSON record (and not the last line, which "
                                     f"a crash may tear); fix or remove that line, or write to a new file")
                warn(f"{path}: the last line was cut off mid-write ({len(line)} bytes, line {i + 1}); removed "
                     f"it, and the measurement it held will be done again")
                _truncate(path, good_end)
                return records
            records.append(rec)
            good_end = end if not last else end
        pos = end
    if data and not data.endswith(b"\n"):  # a whole record without its newline: complete it
        with open(path, "ab") as fh:
            fh.write(b"\n")
    return records


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


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
        recs = repair(path, warn=warn)
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

    def keys(self) -> list[Hashable]:
        return list(self._by_key)
