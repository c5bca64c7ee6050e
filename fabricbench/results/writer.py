"""ResultWriter: append one JSON object per line, flushed and synced as each is measured.

A crash, a timeout or Ctrl-C loses nothing already written. The file is opened (and so checked for
writability) before anything is measured.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Iterator

from fabricbench.files import check_output, dumps
from fabricbench.outputs import OutputError, inherited_root, open_output
from fabricbench.results import records as _records


class ResultWriter:
    """`under`: the output folder the file lies in (a study's --out), no link followed below it."""

    def __init__(self, path: str | os.PathLike[str] | None, *, under: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.records: list[dict[str, Any]] = []  # everything written, also when path is None
        self._fh = None
        if self.path is not None:
            check_output(self.path, what="--out")
            # never through a link: one planted at results.jsonl would send every record outside --out
            self._fh = open_output(self.path, "a", what="--out", under=under or inherited_root(self.path))

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if self._fh is not None:
            try:
                # NaN/Infinity become null: JSON has neither, and every reader would choke on them
                self._fh.write(dumps(record, sort_keys=False) + "\n")
                self._fh.flush()
                _sync(self._fh.fileno())
            except OSError as e:
                fh, self._fh = self._fh, None
                try:
                    fh.close()
                except OSError:
                    pass
                kept = len(self.records) - 1
                raise OutputError(f"--out {self.path}: write failed ({e.strerror}); the {kept} record(s) "
                                  f"written before are kept; free space or choose another path") from None

    def close(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()
            except OSError as e:
                raise OutputError(f"--out {self.path}: write failed on close ({e.strerror})") from None

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):  # /dev/null and pipes cannot sync
            raise


def read_results(path: str | os.PathLike[str], kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Records of a results file, optionally of one kind; lines that are not readable records (a torn last
    line, damage, another tool's JSON) are skipped. results.records.read also says what it skipped."""
    yield from _records.read(path, kind=kind).records
