"""`--nprocs N`: start N local ranks, one process each, as one job of the job layer, and stream rank 0's
records back.

    fabricbench sweep --engine torch --backend gloo --nprocs 2

This process hosts a torch.distributed TCPStore on loopback (the ranks' only meeting point: the config,
NCCL ids, barriers and timings travel through it). The ranks (`python -m fabricbench.measuring.local_rank`) are
one job of several processes, "rank 0" ... "rank N-1", run by the one child runner (jobs.run) as every
other child of fabricbench is, train's ranks included: each rank speaks over the job's channel
(jobs.channel: its records, its pulse, and why it failed), and the runner's policy ends the run:
- a rank that exits without saying why: it died ("rank 1 died (killed by SIGKILL) before it finished");
- a rank whose pulse stops for --stall-timeout (default --timeout + liveness.DEAD_AFTER_S): it is stopped
  (SIGSTOP) or hung where no time-out reaches; every wait inside a rank (store, gloo, NCCL, barrier)
  ends at --timeout, so a live rank always speaks again before that;
- a rank that reports an error: the run ends with it, unless another rank died or went silent first,
  which is then named as the cause (a dead peer makes the others fail with connection errors).
Every rank is killed then, and what rank 0 measured before is kept, having been emitted as it came.
Only rank 0 sends records (measuring/runner.run_rank); its "reused" and "skip" messages (--resume) come
over the same channel, in order with its records.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any, Callable

from fabricbench import errors, jobs
from fabricbench.jobs.liveness import DEAD_AFTER_S
from fabricbench.measuring.config import SweepConfig

CONFIG_KEY = "launch/config"


def rank_argv(rank: int, nprocs: int, port: int, timeout_s: float) -> list[str]:
    """One rank's command (measuring/local_rank.py reads these four arguments)."""
    return [sys.executable, "-m", "fabricbench.measuring.local_rank", str(rank), str(nprocs), str(port), repr(timeout_s)]


def local_stall_s(config: SweepConfig) -> float:
    """How long a rank's pulse may stand still: --stall-timeout, else --timeout + DEAD_AFTER_S (a live rank
    speaks again within --timeout, every wait inside it being bounded by that)."""
    return config.stall_timeout_s if config.stall_timeout_s is not None else config.timeout_s + DEAD_AFTER_S


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

    def said(who: str, msg: dict[str, Any]) -> None:
        if msg.get("m") == "reused" and reused is not None:
            reused(msg["record"])
        elif msg.get("m") == "skip" and on_skip is not None:
            on_skip(msg["skipped"], msg["planned"])

    ranks = {f"rank {r}": rank_argv(r, nprocs, store.port, config.timeout_s) for r in range(nprocs)}
    with jobs.workspace("sweep-ranks") as ws:
        # capture=False: the ranks' warnings (and NCCL's log, where the user set NCCL_DEBUG) show as they come
        out = jobs.run(ranks, workspace=ws, stall_s=local_stall_s(config), capture=False,
                       on_record=emit, on_message=said)
    error = run_error(out)
    if error is not None:
        raise error


def run_error(out: jobs.Outcome) -> BaseException | None:
    """The ranks' outcome as the error this run raises (None: every rank finished): the cause the runner
    named, with what the other ranks then reported."""
    if out.returncode == 0 and not out.message and not out.errors:
        return None
    cause = out.failed or out.stalled
    others = "".join(f"; {who} then reported: {e.get('message')}" for who, e in out.errors.items() if who != cause)
    if out.stalled:
        return errors.CollectiveTimeout(f"{out.message}{others}; every rank was killed")
    if out.message:  # died without saying why
        return errors.FabricbenchError(out.message + others)
    said = out.errors.get(cause) if cause else None
    if said is None:
        codes = ", ".join(f"{who}: {rc}" for who, rc in out.returncodes.items())
        return errors.FabricbenchError(f"the ranks failed without saying why (exit statuses {codes})")
    kind, message = str(said.get("kind")), str(said.get("message"))
    if kind == "KeyboardInterrupt":
        return KeyboardInterrupt(message)
    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.FabricbenchError)):
        cls = errors.FabricbenchError
    return cls(message if message.startswith("rank ") else f"{cause}: {message}")
