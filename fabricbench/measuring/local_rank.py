"""One local rank of `fabricbench sweep --nprocs N`; started by fabricbench/measuring/launch.py (as a job of
the job layer), never by hand.

    python -m fabricbench.measuring.local_rank RANK NPROCS STORE_PORT TIMEOUT_S

Opens the job's channel first (jobs.channel: its pulse covers the start-up), connects to the parent's
TCPStore (which holds the config), runs runner.run_rank and sends over the channel rank 0's records as
they are measured ("reused" and "skip" with --resume), or, when it fails, why (Channel.error). It exits
with os._exit: nothing at interpreter shutdown (a process group's destructor, a stuck thread) can hold it.
"""

from __future__ import annotations

import os
import sys

from fabricbench.exitcodes import Exit
from fabricbench.jobs import channel
from fabricbench.measuring.launch import CONFIG_KEY
from fabricbench.measuring.failures import first_line, translate
from fabricbench.measuring.runner import run_rank
from fabricbench.measuring.session import DistContext


def main(argv: list[str]) -> None:
    rank, nprocs, port = (int(a) for a in argv[:3])
    timeout_s = float(argv[3])
    chan = channel.open_channel(f"rank {rank}")
    if chan is None:
        sys.exit("fabricbench.measuring.local_rank runs under `fabricbench sweep --nprocs N`, not by hand")
    code = Exit.FAILED
    try:
        code = _run(rank, nprocs, port, timeout_s, chan)
    except KeyboardInterrupt:
        _say(chan, "KeyboardInterrupt", "interrupted")
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent as one message
        _say(chan, *failure(e, rank, timeout_s))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def failure(e: BaseException, rank: int, timeout_s: float) -> tuple[str, str]:
    """A rank's failure as (error kind, one line) for the parent: torch.distributed's known failures said
    plainly (failures.translate); anything else is its exception's first line, naming the log file that
    holds its traceback (failures.first_line)."""
    err = translate(e, timeout_s)
    if err is not None:
        return type(err).__name__, str(err)
    return "FabricbenchError", f"rank {rank}: {first_line(e, f'rank {rank}')}"


def _say(chan: channel.Channel, kind: str, message: str) -> None:
    try:
        chan.error(kind, message)
    except OSError:
        pass


def _run(rank: int, nprocs: int, port: int, timeout_s: float, chan: channel.Channel) -> int:
    import datetime
    import pickle

    import torch.distributed as tdist

    try:
        store = tdist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=timeout_s))
        config, run_id, seed, prior = pickle.loads(store.get(CONFIG_KEY))
    except RuntimeError as e:
        err = translate(e, timeout_s)
        if err is None:
            raise
        raise err from None
    dist = DistContext(rank=rank, world_size=nprocs, local_rank=rank,
                       store=tdist.PrefixStore(f"fabricbench/{run_id}", store), timeout_s=timeout_s)
    run_rank(config, dist, chan.record, run_id=run_id, seed=seed, prior=prior if rank == 0 else None,
             reused=lambda rec: chan.send("reused", record=rec),
             on_skip=lambda skipped, planned: chan.send("skip", skipped=skipped, planned=planned))
    return Exit.OK


if __name__ == "__main__":
    main(sys.argv[1:])
