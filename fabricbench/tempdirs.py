"""fabricbench's temporary folders: named for the process that made them, removed when it ends, and what a
killed process left behind removed by the next one.

    from fabricbench import procs
    with procs.temp_dir("train") as tmp:  # removed on exit, Ctrl-C included; stale ones at the next start

A folder's name carries the pid of the process that made it (fabricbench-p<pid>-<tag>-...). A process
killed with SIGKILL runs no clean-up; its folders are found by that pid being gone, and only ours (by uid)
are ever removed. The one child runner (jobs/runner.py) and its callers reach these through procs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

TEMP_PREFIX = "fabricbench-p"
_TEMP_RE = re.compile(r"^fabricbench-p(\d+)-")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def clean_stale(root: str | os.PathLike | None = None) -> list[str]:
    """Remove fabricbench temporary folders (ours, by uid) whose process is gone: a SIGKILL left them."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    me = os.getuid() if hasattr(os, "getuid") else None
    for e in entries:
        m = _TEMP_RE.match(e.name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if not e.is_dir(follow_symlinks=False) or (me is not None and st.st_uid != me):
                continue
        except OSError:
            continue
        if not _pid_alive(int(m.group(1))):
            shutil.rmtree(e.path, ignore_errors=True)
            removed.append(e.path)
    return removed


@contextlib.contextmanager
def temp_dir(tag: str) -> Iterator[Path]:
    """A temporary folder named with our pid, removed on exit (exceptions and Ctrl-C included); stale
    ones of dead fabricbench processes are removed first."""
    clean_stale()
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tag)[:40]
    path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{safe}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
