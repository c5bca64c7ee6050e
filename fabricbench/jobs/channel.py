"""The child's side of a job's one channel: records, progress and a pulse, back to the runner.

    from fabricbench.jobs import channel
    ch = channel.open_channel("rank 1")     # None when not started by jobs.run (e.g. by hand)
    ch.progress(step=3)                       # a sign of progress: the stall clock restarts
    ch.record({...})                          # a record, streamed to the runner's on_record
    ch.error("CollectiveTimeout", "...")      # why this process fails (Outcome.errors), before it exits
    ch.send("skip", skipped=3, planned=9)     # the job's own message (the runner's on_message)

jobs.run gives every job a workspace folder and names it in FABRICBENCH_JOB_CHANNEL. Each process of the
job that speaks (a sweep child, each training rank) appends JSON lines to a file of its own there,
`<who>.chan.jsonl`, with one write per line (O_APPEND: lines from one process never interleave).

The pulse: a thread of each such process touches its file every PULSE_S; the runner (jobs/runner.py, the
same node) reads the file's mtime. A process that is stopped (SIGSTOP) or frozen stops touching it, which
is how the runner tells the rank that stopped answering from the ranks that wait for it: a pulse silent for
liveness.DEAD_AFTER_S is a stopped process. It reaches this node only; across nodes, ranks watch each
other through the store heartbeat (jobs/heartbeat.py). jobs/liveness.py says which is which.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

ENV = "FABRICBENCH_JOB_CHANNEL"
LOG_ENV = "FABRICBENCH_LOG"  # the file a child's traceback goes to; jobs.run names one in the caller's temp folder
SUFFIX = ".chan.jsonl"
PULSE_S = 0.5  # how often a live process touches its channel file: many times within liveness.DEAD_AFTER_S


def file_name(who: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", who) + SUFFIX


class Channel:
    def __init__(self, path: str | os.PathLike, who: str, *, pulse_s: float = PULSE_S) -> None:
        self.path, self.who = Path(path), who
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._stop = threading.Event()
        self.send("hello", pulse_s=pulse_s, pid=os.getpid())
        self._pulse_thread = threading.Thread(target=self._pulse, args=(pulse_s,), daemon=True,
                                              name="fabricbench-channel-pulse")
        self._pulse_thread.start()

    def send(self, m: str, **data: Any) -> None:
        line = (json.dumps({"m": m, "who": self.who, **data}, default=str) + "\n").encode()
        os.write(self._fd, line)

    def progress(self, **data: Any) -> None:
        """A step finished (or a phase of start-up): restarts this process's stall clock."""
        self.send("progress", **data)

    def record(self, rec: dict[str, Any]) -> None:
        self.send("record", record=rec)

    def error(self, kind: str, message: str, **data: Any) -> None:
        """Why this process fails (an exception class's name, its message): said before it exits, so the
        runner can tell a process that failed for a reason from one that died. `stalled="rank 3"`: this
        process's stall watchdog (jobs/heartbeat.py) named another rank; the runner ends the job at once."""
        self.send("error", kind=kind, message=message, **data)

    def _pulse(self, period: float) -> None:
        while not self._stop.wait(period):
            try:
                os.utime(self._fd)
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        try:
            os.close(self._fd)
        except OSError:
            pass


def keep_traceback(who: str, text: str, environ: dict[str, str] | None = None) -> str | None:
    """Append a child's traceback to the job's log file (LOG_ENV) and return its path, so that the error
    line says the exception's message and where the traceback is, never the traceback itself. None: no
    log file named (not started by jobs.run), or it cannot be written."""
    path = (os.environ if environ is None else environ).get(LOG_ENV)
    if not path:
        return None
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"--- {who}, pid {os.getpid()}, {stamp} ---\n{text.rstrip()}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        return None
    return path


def open_channel(who: str, environ: dict[str, str] | None = None) -> Channel | None:
    """This process's channel to the runner that started its job, or None when there is none."""
    folder = (os.environ if environ is None else environ).get(ENV)
    if not folder or not os.path.isdir(folder):
        return None
    return Channel(Path(folder) / file_name(who), who)
