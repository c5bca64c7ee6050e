"""`--nprocs N`: start N local ranks, one process each, and stream rank 0's records back.

    fabricbench sweep --engine torch --backend gloo --nprocs 2

This process hosts a torch.distributed TCPStore on loopback (the ranks' only meeting point: NCCL ids,
barriers and timings travel through it); the ranks are fresh `spawn` processes that run
runner.run_rank. Records come back over a multiprocessing queue as they are measured, so the caller
writes each one at once. A rank that dies or goes silent past the timeout ends the run with what was
measured kept.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import socket
import time
import traceback
from typing import Any, Callable

from fabricbench import errors
from fabricbench.measuring.config import SweepConfig

SILENCE_GRACE_S = 120.0  # beyond --timeout: start-up, imports and communicator creation


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(config: SweepConfig, rank: int, nprocs: int, port: int, q, run_id: str, seed: int) -> None:
    try:
        import datetime

        import torch.distributed as tdist

        from fabricbench.measuring.runner import run_rank
        from fabricbench.measuring.session import DistContext

        store = tdist.TCPStore("127.0.0.1", port, None, False,
                               timeout=datetime.timedelta(seconds=config.timeout_s + SILENCE_GRACE_S))
        dist = DistContext(rank=rank, world_size=nprocs, local_rank=rank,
                           store=tdist.PrefixStore(f"fabricbench/{run_id}", store))
        run_rank(config, dist, lambda rec: q.put(("record", rec)), run_id=run_id, seed=seed)
        q.put(("done", rank))
    except KeyboardInterrupt:
        q.put(("error", rank, "KeyboardInterrupt", "interrupted"))
    except errors.FabricbenchError as e:
        q.put(("error", rank, type(e).__name__, str(e)))
    except BaseException as e:  # a bug: keep its traceback for the report
        q.put(("error", rank, "FabricbenchError", f"rank {rank}: {type(e).__name__}: {e}\n"
                                                  + traceback.format_exc()))


def launch_local(config: SweepConfig, emit: Callable[[dict[str, Any]], None], *, run_id: str,
                 seed: int) -> None:
    import datetime

    import torch.distributed as tdist

    nprocs = config.nprocs
    assert nprocs and nprocs > 0
    port = _free_port()
    # The store lives here so that it outlives any rank; the ranks connect as clients.
    store = tdist.TCPStore("127.0.0.1", port, None, True, wait_for_workers=False,  # noqa: F841
                           timeout=datetime.timedelta(seconds=config.timeout_s + SILENCE_GRACE_S))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(config, r, nprocs, port, q, run_id, seed), daemon=True)
             for r in range(nprocs)]
    for p in procs:
        p.start()
    done: set[int] = set()
    failure: tuple[int, str, str] | None = None
    last_heard = time.monotonic()
    try:
        while len(done) < nprocs and failure is None:
            try:
                msg = q.get(timeout=0.5)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in done]
                if dead:
                    # A message may still be in flight from a rank that just exited.
                    try:
                        msg = q.get(timeout=2.0)
                    except queue.Empty:
                        codes = ", ".join(f"rank {r} exit {procs[r].exitcode}" for r in dead)
                        failure = (dead[0], "FabricbenchError", f"a rank died without a word ({codes})")
                        break
                elif time.monotonic() - last_heard > config.timeout_s + SILENCE_GRACE_S:
                    failure = (0, "CollectiveTimeout", f"no rank reported for "
                               f"{config.timeout_s + SILENCE_GRACE_S:.0f} s; the ranks were stopped")
                    break
                else:
                    continue
            last_heard = time.monotonic()
            if msg[0] == "record":
                emit(msg[1])
            elif msg[0] == "done":
                done.add(msg[1])
            elif msg[0] == "error":
                failure = (msg[1], msg[2], msg[3])
    finally:
        deadline = time.monotonic() + (5.0 if failure is None else 1.0)
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    if failure is not None:
        rank, kind, message = failure
        if kind == "KeyboardInterrupt":
            raise KeyboardInterrupt
        cls = getattr(errors, kind, errors.FabricbenchError)
        if not (isinstance(cls, type) and issubclass(cls, errors.FabricbenchError)):
            cls = errors.FabricbenchError
        raise cls(message)
