"""Where `fabricbench import` writes: --out rewritten through a temporary file beside it, the records
already there copied first, the new ones written as they are read, the whole renamed into place at the end.

    fabricbench import all_reduce.log nvbandwidth.txt --out imported.jsonl

So memory does not grow with the input, a reader of --out sees the old file or the new one, never half,
and a file that fails to import leaves --out as it was (nothing of any file is written). No link is
followed (fabricbench/outputs.py): a link at --out is refused, the temporary file is created without
following one, and the rename happens in the folder opened once.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from fabricbench.files import check_input
from fabricbench.outputs import OutputError, folder, refuse_link

_BLOCK = 1 << 20


class Appending:
    """--out being rewritten: `write` each record's line, then `commit` (or `abort`, which leaves it as it was)."""

    def __init__(self, out_path: str):
        self.path = Path(out_path)
        refuse_link(out_path, what="--out")
        self.dir = folder(self.path.parent, what="--out", follow=True, shown=self.path)
        self.name, self.tmp = self.path.name, f".{self.path.name}.{secrets.token_hex(4)}.tmp"
        old = self.dir.lstat(self.name)
        if old is not None:
            check_input(out_path, what="--out")  # a FIFO, device or oversize file is refused before it is read
        self.mode = stat.S_IMODE(old.st_mode) if old is not None else 0o644
        self.fh = self.dir.open(self.tmp, "wb", perm=0o600)
        try:
            if old is not None:
                self._copy_old()
        except BaseException:
            self.abort()
            raise

    def _copy_old(self) -> None:
        last = b"\n"
        with self.dir.open(self.name, "rb") as src:
            while block := src.read(_BLOCK):
                self._put(block)
                last = block[-1:]
        if last != b"\n":
            self._put(b"\n")  # a torn last line stays torn (readers skip it); ours start on a line of their own

    def _put(self, data: bytes) -> None:
        try:
            self.fh.write(data)
        except OSError as e:
            raise OutputError(f"--out {self.path}: write failed ({e.strerror}); {self.path} was left as it "
                              f"was") from None

    def write(self, line: str) -> None:
        self._put(line.encode("utf-8") + b"\n")

    def commit(self) -> None:
        try:
            self.fh.flush()
            os.fsync(self.fh.fileno())
            os.fchmod(self.fh.fileno(), self.mode)
            self.fh.close()
            os.replace(self.tmp, self.name, src_dir_fd=self.dir.fd, dst_dir_fd=self.dir.fd)
        except OSError as e:
            self.abort()
            raise OutputError(f"--out {self.path}: write failed ({e.strerror}); {self.path} was left as it "
                              f"was") from None
        self.dir.close()

    def abort(self) -> None:
        try:
            self.fh.close()
        except OSError:
            pass
        self.dir.unlink(self.tmp)
        self.dir.close()
