"""One local rank of `fabricbench sweep --nprocs N`; started by fabricbench/measuring/launch.py, never by hand.

    python -m fabricbench.measuring.rank RANK NPROCS STORE_PORT MSG_FD TIMEOUT_S HEARTBEAT_S

Connects to the parent's TCPStore (which holds the config), runs runner.run_rank, and writes JSON lines
to MSG_FD: {"m": "alive"} every HEARTBEAT_S from a thread of its own (started before torch is imported,
so the parent hears it during start-up), then records, and "done" or "error" last. It exits with
os._exit: nothing at interpreter shutdown (a process group's destructor, a stuck thread) can hold it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback

from fabricbench.errors import FabricbenchError
from fabricbench.measuring.launch import CONFIG_KEY
from fabricbench.measuring.runner import run_rank, translate
from fabricbench.measuring.session import DistContext


class Channel:
    """JSON lines to the parent; one lock, so the heartbeat never splits a record."""

    def __init__(self, fd: int) -> None:
        self.fh = os.fdopen(fd, "wb", buffering=0)
        self.lock = threading.Lock()

    def send(self, what: str, **fields) -> None:
        data = (json.dumps({"m": what, **fields}) + "\n").encode()
        with self.lock:
            self.fh.write(data)

    def beat(self, period_s: float) -> None:
        import time

        while True:
            time.sleep(period_s)
            try:
                self.send("alive")
            except OSError:  # the parent is gone (the death signal follows)
                os._exit(1)


def main(argv: list[str]) -> None:
    rank, nprocs, port, fd = (int(a) for a in argv[:4])
    timeout_s, heartbeat_s = float(argv[4]), float(argv[5])
    chan = Channel(fd)
    threading.Thread(target=chan.beat, args=(heartbeat_s,), daemon=True, name="heartbeat").start()
    code = 1
    try:
        code = _run(rank, nprocs, port, timeout_s, chan)
    except KeyboardInterrupt:
        _say(chan, "error", kind="KeyboardInterrupt", message="interrupted")
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent as one message
        if isinstance(e, FabricbenchError):
            _say(chan, "error", kind=type(e).__name__, message=str(e))
        else:  # a bug: keep its traceback for the report
            _say(chan, "error", kind="FabricbenchError",
                 message=f"rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _say(chan: Channel, what: str, **fields) -> None:
    try:
        chan.send(what, **fields)
    except OSError:
        pass


def _run(rank: int, nprocs: int, port: int, timeout_s: float, chan: Channel) -> int:
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
    run_rank(config, dist, lambda rec: chan.send("record", record=rec), run_id=run_id, seed=seed,
             prior=prior if rank == 0 else None, reused=lambda rec: chan.send("reused", record=rec),
             on_skip=lambda skipped, planned: chan.send("skip", skipped=skipped, planned=planned))
    chan.send("done")
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
