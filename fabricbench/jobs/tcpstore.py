"""The one way fabricbench opens and calls a TCPStore (torch.distributed's key-value server), for the rank
heartbeat (jobs/heartbeat.py) and the study across nodes (studying/nodes.py) alike.

    store = tcpstore.open_store("node0", 29400, host=False, connect_s=60)   # one constructor
    calls = tcpstore.Calls(store)                                           # calls on a thread of their own
    calls("check", ["job/3"])        # at most STORE_WAIT_S (and a little): else StoreGone

One bound per call (STORE_WAIT_S): a call to a live store answers in milliseconds, so a store silent for
longer is gone or cut off, and the caller goes on to say so. TCPStore's own time-out bounds only the wait
for a key (get, wait) on a store that answers; a call whose server went silent (its node unplugged, its
process stopped) may never return at all: torch 2.13's check() on a SIGSTOPped server still blocked after
117 s with a 2 s time-out set. So Calls makes each call on a worker thread and waits for it at most the
bound, and the heartbeat (jobs/heartbeat.py) judges on a thread that never calls the store.
"""

from __future__ import annotations

import datetime
import queue
import threading
from typing import Any

STORE_WAIT_S = 2.0  # one store call's bound
# what a call to a store whose host has gone raises: torch's DistStoreError and DistNetworkError are
# RuntimeErrors, a refused or reset connection an OSError, a call past its bound StoreGone (a TimeoutError)
STORE_ERRORS = (RuntimeError, OSError, TimeoutError)


class StoreGone(TimeoutError):
    """A store call that got no answer within STORE_WAIT_S."""


def open_store(addr: str, port: int, *, host: bool = False, connect_s: float = 60.0) -> Any:
    """A TCPStore at addr:port: its server in this process when `host`, else a client that waits up to
    connect_s for the server. Its waits for a key are then bounded by STORE_WAIT_S; a call to a server
    that went silent is not (module docstring: Calls bounds it)."""
    from torch.distributed import TCPStore

    # use_libuv=False: a server here (the study's) is the classic one the multi-node tests ran; a client
    # ignores the flag
    store = TCPStore(addr, port, None, host, timeout=datetime.timedelta(seconds=connect_s),
                     wait_for_workers=False, use_libuv=False)
    store.set_timeout(datetime.timedelta(seconds=STORE_WAIT_S))
    return store


class Calls:
    """A store's calls made on one worker thread, each waited for at most `wait_s`: the caller never
    blocks longer on a store whose link went down. After a call that never returned, the later ones wait
    behind it, and time out too: the store is gone either way."""

    # wait_s: the store's own bound plus a second, so that a call the store itself timed out says so (its
    # error) rather than StoreGone; only a call that never returns reaches it
    def __init__(self, store: Any, wait_s: float = STORE_WAIT_S + 1.0) -> None:
        self.store, self.wait_s = store, wait_s
        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._work, daemon=True, name="fabricbench-store-calls").start()

    def __call__(self, method: str, *args: Any) -> Any:
        done = threading.Event()
        box: list[Any] = []
        self._jobs.put((method, args, box, done))
        if not done.wait(self.wait_s):
            raise StoreGone(f"{method} got no answer in {self.wait_s:g} s")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def _work(self) -> None:
        while True:
            method, args, box, done = self._jobs.get()
            try:
                box.append((True, getattr(self.store, method)(*args)))
            except Exception as e:  # noqa: BLE001 - handed to the caller, who raises it
                box.append((False, e))
            done.set()
