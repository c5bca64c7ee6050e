"""One writer per study folder: a lock on DIR/.study.lock, held for the whole run.

    fabricbench study --out lab/ --resume      (while another study writes lab/: one line, exit 2, its pid)

Two studies (or a study and a --resume) on one folder would each delete and rewrite the other's unit
files. flock() is held by the open file, so the kernel lets it go when the holder ends however it ends
(SIGKILL included): a stale lock file never blocks the next run. The holder writes its pid in the file,
for the refusal to name.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from typing import Iterator

from fabricbench.errors import UsageError
from fabricbench.outputs import folder

LOCK = ".study.lock"
PID_WAIT_S = 1.0  # a holder writes its pid right after it locks: how long a refusal waits to read it


@contextmanager
def one_writer(out: str | os.PathLike) -> Iterator[None]:
    """Hold the study folder's lock for the block; UsageError naming the holder's pid when it is held."""
    with folder(out, what="--out") as d:  # the folder itself must not be a link (outputs.py)
        fh = d.open(LOCK, "ab")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise UsageError(f"--out {out}: a study is running there (pid {_holder(d)}); wait for it to end "
                             f"or stop it, then --resume, or choose another --out") from None
        except BaseException:
            fh.close()
            raise
    try:
        os.ftruncate(fh.fileno(), 0)
        fh.write(f"{os.getpid()}\n".encode())
        fh.flush()
        yield
    finally:
        fh.close()  # the lock goes with the descriptor


def _holder(d) -> str:
    """The pid the lock's holder wrote ("unknown" if it has not yet, or wrote nothing readable)."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        try:
            with d.open(LOCK, "rb") as fh:
                text = fh.read(64).decode("ascii", "replace").strip()
        except (OSError, UsageError):
            text = ""
        if text.isdigit() or time.monotonic() > deadline:
            return text if text.isdigit() else "unknown"
        time.sleep(0.05)
