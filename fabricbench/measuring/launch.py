"""`--nprocs N`: start N local ranks, one process each, and stream rank 0's records back.

    fabricbench sweep --engine torch --backend gloo --nprocs 2

This process hosts a torch.distributed TCPStore on loopback (the ranks' only meeting point: the config,
NCCL ids, barriers and timings travel through it). Each rank is a fresh `python -m
fabricbench.measuring.rank` started with fabricbench.procs (its own process group, SIGKILL when this
process dies) and talks back over a pipe of its own, one JSON line per message: records as they are
measured, and a heartbeat every HEARTBEAT_S from a thread that runs whatever the rank is doing.

When the run ends early, every rank is killed (SIGKILL: it works on stopped processes) and what rank 0
measured before is kept, having been emitted as it came:
- a rank that exits without saying "done" or why: it died (the message names its exit status or signal);
- a rank whose heartbeat stops for --timeout + DEAD_AFTER_S: it is stopped (SIGSTOP) or hung where no
  time-out reaches; every wait inside a rank (store, gloo, NCCL, barrier) ends at --timeout, so a live
  rank always speaks again before that;
- a rank that reports an error: the run ends with it, unless another rank died or went silent first,
  which is then named as the cause (a dead peer makes the others fail with connection errors).
"""

from __future__ import annotations

import json
import os
import pickle
import selectors
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench import errors, procs
from fabricbench.measuring.config import SweepConfig

HEARTBEAT_S = 0.5  # a rank's "alive" period
DEAD_AFTER_S = 5.0  # past --timeout: heartbeats silent this long mean a stopped or hung rank
SETTLE_S = 1.0  # after a rank's error: time for the rank that caused it to show as dead or silent
EXIT_WAIT_S = 5.0  # after every rank said "done": time to exit on their own before they are killed
CONFIG_KEY = "launch/config"


@dataclass
class _Rank:
    rank: int
    proc: Any  # subprocess.Popen
    fd: int  # read end of its message pipe; -1 once closed
    buf: bytes = b""
    last_heard: float = field(default_factory=time.monotonic)
    done: bool = False
    error: tuple[str, str] | None = None  # (error class name, message)
    eof: bool = False


def launch_local(config: SweepConfig, emit: Callable[[dict[str, Any]], None], *, run_id: str, seed: int,
                 prior: list[dict[str, Any]] | None = None,
                 reused: Callable[[dict[str, Any]], None] | None = None,
                 on_skip: Callable[[int, int], None] | None = None) -> None:
    """Run the sweep on config.nprocs local ranks; rank 0's records go to `emit` (reused ones, with
    `prior`, to `reused`). Raises the run's error after every rank is gone."""
    import datetime

    import torch.distributed as tdist

    nprocs = config.nprocs
    assert nprocs and nprocs > 0
    # Port 0: the store picks a free port itself (no window in which another process can take it).
    store = tdist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=config.timeout_s))
    store.set(CONFIG_KEY, pickle.dumps((config, run_id, seed, prior)))
    ranks: list[_Rank] = []
    sel = selectors.DefaultSelector()
    try:
        for r in range(nprocs):
            rfd, wfd = os.pipe()
            try:
                argv = [sys.executable, "-m", "fabricbench.measuring.rank", str(r), str(nprocs), str(store.port),
                        str(wfd), repr(config.timeout_s), repr(HEARTBEAT_S)]
                p = procs.spawn(argv, pass_fds=(wfd,))
            except BaseException:
                os.close(rfd)
                raise
            finally:
                os.close(wfd)  # the rank holds the write end: EOF here means it is gone
            ranks.append(_Rank(rank=r, proc=p, fd=rfd))
            sel.register(rfd, selectors.EVENT_READ, ranks[-1])
        failure = _watch(ranks, sel, config.timeout_s, emit, reused, on_skip)
    finally:
        _end(ranks, sel)
    if failure is not None:
        cls, message = failure
        if cls is KeyboardInterrupt:
            raise KeyboardInterrupt
        raise cls(message)


def _watch(ranks: list[_Rank], sel, timeout_s: float, emit, reused, on_skip) -> tuple[type, str] | None:
    """Read every rank's messages until all are done or the run must end; returns (error class, message)
    of the cause, or None."""
    settle_until = None
    while True:
        for key, _ in sel.select(timeout=0.2):
            _read(key.data, sel, emit, reused, on_skip)
        now = time.monotonic()
        if all(r.done for r in ranks):
            return None
        cause = _cause(ranks, now, timeout_s)
        if cause is not None:
            return cause
        if any(r.error for r in ranks):
            # A rank failed; give the one that made it fail (dead, stopped) a moment to show itself.
            settle_until = settle_until or now + SETTLE_S
            if now >= settle_until:
                return _first_error(ranks)


def _cause(ranks: list[_Rank], now: float, timeout_s: float) -> tuple[type, str] | None:
    """A rank that died or went silent: the root cause of whatever the others report."""
    for r in ranks:
        if r.done or r.error:
            continue
        code = r.proc.poll()
        # EOF first, so that its last messages are read; unless a stray holds the pipe open
        if code is not None and (r.eof or now - r.last_heard > 4 * HEARTBEAT_S + 1):
            return errors.FabricbenchError, _died(r.rank, code) + _others(ranks, r)
    for r in ranks:
        if r.done or r.error:
            continue
        silent = now - r.last_heard
        if silent > timeout_s + DEAD_AFTER_S or (any(o.error for o in ranks) and silent > 4 * HEARTBEAT_S + 1):
            return errors.CollectiveTimeout, (f"rank {r.rank} stopped answering {silent:.0f} s ago (stopped, or "
                                              f"hung where --timeout {timeout_s:g} s does not reach)"
                                              + _others(ranks, r) + "; every rank was killed")
    return None


def _died(rank: int, code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} died (killed by {name}) before it finished"
    return f"rank {rank} died (exit status {code}) before it finished"


def _others(ranks: list[_Rank], cause: _Rank) -> str:
    said = [f"rank {o.rank} then reported: {o.error[1]}" for o in ranks if o is not cause and o.error]
    return f"; {'; '.join(said)}" if said else ""


def _first_error(ranks: list[_Rank]) -> tuple[type, str]:
    r = next(r for r in ranks if r.error)
    kind, message = r.error
    if kind == "KeyboardInterrupt":
        return KeyboardInterrupt, message
    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.FabricbenchError)):
        cls = errors.FabricbenchError
    return cls, f"rank {r.rank}: {message}" if not message.startswith("rank ") else message


def _read(r: _Rank, sel, emit, reused, on_skip) -> None:
    try:
        chunk = os.read(r.fd, 1 << 16)
    except BlockingIOError:
        return
    if not chunk:
        sel.unregister(r.fd)
        os.close(r.fd)
        r.fd, r.eof = -1, True
        if r.buf.strip():
            _handle(r, r.buf, emit, reused, on_skip)
        r.buf = b""
        return
    r.last_heard = time.monotonic()
    r.buf += chunk
    *lines, r.buf = r.buf.split(b"\n")
    for line in lines:
        if line.strip():
            _handle(r, line, emit, reused, on_skip)


def _handle(r: _Rank, line: bytes, emit, reused, on_skip) -> None:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return  # a torn last line from a rank killed mid-write
    kind = msg.get("m")
    if kind == "record":
        emit(msg["record"])
    elif kind == "reused" and reused is not None:
        reused(msg["record"])
    elif kind == "skip" and on_skip is not None:
        on_skip(msg["skipped"], msg["planned"])
    elif kind == "done":
        r.done = True
    elif kind == "error":
        r.error = (msg["kind"], msg["message"])


def _end(ranks: list[_Rank], sel) -> None:
    """Every rank gone and reaped: those that said done get EXIT_WAIT_S to exit, the rest are killed."""
    if ranks and all(r.done for r in ranks):
        deadline = time.monotonic() + EXIT_WAIT_S
        for r in ranks:
            try:
                r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - TimeoutExpired: killed below
                pass
    procs.kill_all([r.proc for r in ranks], grace_s=0)
    for r in ranks:
        if r.fd >= 0:
            try:
                sel.unregister(r.fd)
            except (KeyError, ValueError):
                pass
            os.close(r.fd)
            r.fd = -1
    sel.close()
