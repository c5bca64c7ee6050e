"""ResultWriter: append one JSON object per line, flushed and synced as each is measured.

A crash, a timeout or Ctrl-C loses nothing already written. The file is opened (and so checked for
writability) before anything is measured.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from fabricbench.errors import UsageError


class ResultWriter:
    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path is not None else None
        self.records: list[dict[str, Any]] = []  # everything written, also when path is None
        self._fh = None
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as e:
                raise UsageError(f"--out {self.path}: cannot write there ({e.strerror}); "
                                 f"choose a writable path") from None

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if self._fh is not None:
            self._fh.write(json.dumps(record, sort_keys=False) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | os.PathLike, kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Records of a results file, optionally of one kind; a torn last line (crash mid-write) is skipped."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if kind is None or rec.get("kind") == kind:
                yield rec
