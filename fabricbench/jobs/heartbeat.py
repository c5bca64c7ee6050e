"""The store heartbeat and the stall watchdog inside every rank, which names the rank and host that stopped.

    fabricbench train --nnodes 2 --node-rank 1 --master-addr node0 --stall-timeout 30 ...
    hb = heartbeat.start(rank=1, world=4, host_addr="node0", port=29500, stall_s=30, on_stall=end_run)
    hb.progress(step=12)        # each step (train) or measured size (sweep): the stall clock restarts
    hb.failed("RuntimeError: Connection reset by peer")   # -> the peer to blame, if one is dead
    hb.close()

Who writes and who reads: every rank, on every node, opens a second client of the run's TCPStore (the
rendezvous store torchrun's agent or rank 0 hosts; not the communicator) and, on a thread of its own, every
BEAT_S:
- writes `fabricbench/hb/<rank>` = {"seq", "host", "step", "state"}: its host registers as it joins, so
  a rank that never joins is known by its absence;
- reads every rank's beat and watches two clocks per peer, both on this process's monotonic clock (no
  clock agreement between nodes is needed): when its `seq` last changed (it is alive) and when its
  `step` last changed (it progresses).

The verdict (`on_stall(message, culprit)`, once, from the thread; the caller ends the rank):
- a peer whose beat has not changed for the stall bound is named: it is stopped (SIGSTOP), dead, or its
  node is off the network. When every rank of one host is silent, the host is named with its ranks:
  "node node1 (ranks 2, 3) made no progress for 30 s (last step 12)";
- every rank alive but none stepped for the bound: the one furthest behind is named (hung in a kernel or
  a collective whose peer is alive but lost);
- the store itself unreachable for the bound: the node that hosts it (rank 0's) is named.
A peer's silence counts only while the store answers (up to its last answer, not now): this rank learns
of its peers through the store alone, so when the store stops answering, its silence is the one verdict. A
clock that ran on would name a peer for the store's silence, and first whenever it started earlier (a peer
not yet read when the link went down was called "never joined").
The stall bound is `stall_s`, or when None max(MIN_STALL_S, STEPS_X x the median step so far) (before the
first step: MIN_STALL_S). A stopped rank is named by every live rank within the bound plus BEAT_S; since
a collective's own time-outs (gloo's, NCCL's watchdog, the store's) are the run's --timeout (default
1800 s), this fires first unless --stall-timeout is set above --timeout. A study's nodes beat the same
way, one "rank" per node, and node 0 reads them (studying/nodes.py).

This is the heartbeat across nodes; inside one node the runner also reads each process's channel pulse
(jobs/channel.py). Both are judged dead after liveness.DEAD_AFTER_S where no stall bound applies
(jobs/liveness.py).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench.declare import Declared
from fabricbench.exitcodes import Exit
from fabricbench.jobs.liveness import DEAD_AFTER_S
from fabricbench.jobs.tcpstore import STORE_WAIT_S, open_store

BEAT_S = 1.0  # how often a rank writes its beat and reads its peers': several times within DEAD_AFTER_S
# a verdict is checked at least every BEAT_S + STORE_WAIT_S (one store call's bound, jobs/tcpstore.py)
MIN_STALL_S = 60.0  # the default bound's floor
STALL_LO_S, STALL_HI_S = 3.0, 86_400.0  # --stall-timeout's accepted range (a beat every BEAT_S must be missed
# several times), for train, sweep and study alike
STALL_TIMEOUT = Declared(  # --stall-timeout, declared once: each config shares it (declare.shared)
    flag="--stall-timeout", kind="seconds", lo=STALL_LO_S, hi=STALL_HI_S, unit="s",
    help="Seconds a rank's heartbeat may stop (SIGSTOP, a dead node) before the run ends naming it.")
STALL_EXIT = Exit.STALLED  # a rank the watchdog ended exits with this: the one code, train's ranks too
STEPS_X = 10.0  # the default bound: this many median steps, when that is above the floor
PREFIX = "fabricbench/hb"
RUNNING, FAILED, DONE = "running", "failed", "done"


@dataclass
class Peer:
    rank: int
    host: str | None = None
    seq: int = -1
    step: int | None = None  # the last step it reported (shown)
    tick: int | None = None  # its progress count (profiled steps too): what the stall clock watches
    state: str | None = None
    message: str | None = None
    alive_at: float = field(default_factory=time.monotonic)  # when its seq last changed (here)
    step_at: float = field(default_factory=time.monotonic)  # when its step last changed (here)

    def name(self) -> str:
        return f"rank {self.rank} (host {self.host})" if self.host else f"rank {self.rank} (never joined)"


def stall_bound(stall_s: float | None, step_times: list[float]) -> float:
    """The stall bound in force: the fixed one, else max(MIN_STALL_S, STEPS_X x median step so far)."""
    if stall_s is not None:
        return stall_s
    if not step_times:
        return MIN_STALL_S
    return max(MIN_STALL_S, STEPS_X * statistics.median(step_times))


def store_host_gone(who: str, silent_s: float) -> str:
    """The one sentence for a store that stopped answering: the process that hosts it is gone or cut off,
    so its node is named (rank 0's node for a run's rendezvous store, node 0 for a study's store)."""
    return f"{who} is unreachable: the store it hosts gave no answer for {silent_s:.0f} s"


def verdict(peers: dict[int, Peer], *, me: int, now: float, bound: float, store_ok_at: float,
            store_host: str | None) -> tuple[str, list[int]] | None:
    """(message, culprit ranks) when the run must end now; None otherwise. Pure: the tests drive it."""
    if now - store_ok_at > bound:
        r0 = peers.get(0)
        host = (r0.host if r0 else None) or store_host
        ranks = sorted(p.rank for p in peers.values() if p.host and p.host == host) or [0]
        return store_host_gone(f"node {host} (ranks {', '.join(map(str, ranks))})", now - store_ok_at), ranks
    others = [p for p in peers.values() if p.rank != me and p.state != DONE]
    silent = [p for p in others if quiet_s(p.alive_at, store_ok_at) > bound]
    if silent:
        by_host: dict[str | None, list[Peer]] = {}
        for p in silent:
            by_host.setdefault(p.host, []).append(p)
        host, group = max(by_host.items(), key=lambda kv: len(kv[1]))
        on_host = [p for p in peers.values() if p.host == host] if host else group
        ranks = sorted(p.rank for p in group)
        quiet = max(quiet_s(p.alive_at, store_ok_at) for p in group)
        last = _last(group)
        if host and len(on_host) == len(group) and len(group) > 1:
            who = f"node {host} (ranks {', '.join(map(str, ranks))})"
        else:
            who = group[0].name() if len(group) == 1 else ", ".join(p.name() for p in group)
        return f"{who} made no progress for {quiet:.0f} s{last}", ranks
    live = [p for p in peers.values() if p.state != DONE]
    if live and all(p.tick is not None for p in live) and all(quiet_s(p.step_at, store_ok_at) > bound for p in live):
        behind = min(live, key=lambda p: (p.tick or 0, p.rank))
        return (f"{behind.name()} made no progress for {quiet_s(behind.step_at, store_ok_at):.0f} s"
                f"{_last([behind])}; every "
                f"rank is alive, none stepped (it is furthest behind)"), [behind.rank]
    return None


def quiet_s(since: float, store_ok_at: float) -> float:
    """How long a peer's clock (its beat, or its step) stood still while the store answered: what was
    seen up to the store's last answer (module docstring)."""
    return max(0.0, store_ok_at - since)


def _last(group: list[Peer]) -> str:
    steps = [p.step for p in group if p.step is not None]
    return f" (last step {min(steps)})" if steps else " (no step reported yet)"


class Heartbeat:
    """This rank's beat and its watch over the others (module docstring)."""

    def __init__(self, store: Any, *, rank: int, world: int, stall_s: float | None,
                 on_stall: Callable[[str, list[int]], None] | None, store_host: str | None = None,
                 host: str | None = None) -> None:
        self.store, self.rank, self.world, self.stall_s = store, rank, world, stall_s
        self.on_stall, self.store_host = on_stall, store_host
        self.host = host or socket.gethostname()
        self.peers = {r: Peer(r) for r in range(world)}
        self.step: int | None = None
        self.tick: int | None = None
        self.step_times: list[float] = []
        self._last_step_at: float | None = None
        self.state, self.message = RUNNING, None
        self.seq = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.fired: tuple[str, list[int]] | None = None
        self.store_ok_at = time.monotonic()
        self._kick = threading.Event()  # beat now (done() says so at once)
        self._beats = 0  # beats written, by the heartbeat thread (the only one that talks to the store)
        # Two threads: one talks to the store (a store call on a link that went down may never return),
        # the other judges from what the first last learnt, so a hung store call is itself a verdict. With
        # no on_stall, the owner judges (silent(), from the same memory: never a store call).
        self._io = threading.Thread(target=self._io_loop, daemon=True, name="fabricbench-heartbeat")
        self._thread = threading.Thread(target=self._watch_loop, daemon=True, name="fabricbench-stall-watch")
        self._io.start()
        if on_stall is not None:
            self._thread.start()

    # -- this rank ------------------------------------------------------------------------------------------
    def progress(self, step: int | None = None) -> None:
        """A step (or a measured size) finished; `step` is shown in the verdict (None: keep the last)."""
        now = time.monotonic()
        with self._lock:
            if self._last_step_at is not None:
                self.step_times.append(now - self._last_step_at)
            self._last_step_at = now
            self.tick = (self.tick or 0) + 1
            if step is not None:
                self.step = step

    def done(self) -> None:
        """This rank finished: its silence from now on says nothing (published by the heartbeat thread,
        waited for a moment)."""
        with self._lock:
            self.state = DONE
            before = self._beats
        self._kick.set()
        deadline = time.monotonic() + STORE_WAIT_S + BEAT_S
        while self._beats <= before and self._io.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)

    def failed(self, message: str, wait_s: float = DEAD_AFTER_S) -> tuple[str, list[int]] | None:
        """This rank's collective failed (a connection reset, a time-out): publish it, then wait up to
        `wait_s` for a peer on another host that is silent (dead) -> (message naming it, its ranks), else
        None (this rank's own error stands, and a dead peer on this host is its launcher's to name)."""
        with self._lock:
            self.state, self.message = FAILED, message[:300]  # the heartbeat thread publishes it
        if self.fired is not None:
            return self.fired
        if all(p.host == self.host for p in self.peers.values() if p.rank != self.rank):
            return None  # one host: its launcher names a dead rank from its exit status
        # a peer's last beat is seen up to one BEAT_S late (it is read once a beat): wait that much more
        deadline = time.monotonic() + wait_s + 2 * BEAT_S + 0.5
        while time.monotonic() < deadline:
            now = time.monotonic()
            # a peer on this host: its launcher sees it die (its exit status), which says more
            ok_at = self.store_ok_at
            dead = [p for p in self.peers.values() if p.rank != self.rank and p.state not in (DONE, FAILED)
                    and p.host != self.host and quiet_s(p.alive_at, ok_at) > wait_s]
            if dead:
                v = verdict({p.rank: p for p in dead} | {self.rank: self.peers[self.rank]}, me=self.rank,
                            now=now, bound=wait_s - 0.01, store_ok_at=ok_at, store_host=self.store_host)
                if v is not None:
                    return v[0].replace(" made no progress", " died: no heartbeat"), v[1]
            if now - self.store_ok_at > wait_s:
                return verdict(self.peers, me=self.rank, now=now, bound=wait_s - 0.01,
                               store_ok_at=self.store_ok_at, store_host=self.store_host)
            time.sleep(BEAT_S / 2)
        return None

    def silent(self, ranks: list[int], bound_s: float) -> tuple[int | None, float] | None:
        """(rank, seconds) for the first of `ranks` whose beat stood still longer than bound_s, (None,
        seconds) when the store itself gave no answer that long (its host is gone), else None. Reads what
        the heartbeat thread last learnt, so a hung store cannot block it."""
        now = time.monotonic()
        if now - self.store_ok_at > bound_s:
            return None, now - self.store_ok_at
        for r in ranks:
            quiet = quiet_s(self.peers[r].alive_at, self.store_ok_at)
            if quiet > bound_s:
                return r, quiet
        return None

    def close(self) -> None:
        """Stop the thread and wait for it: a thread still inside a store call while the interpreter
        tears down aborts the process ("terminate called without an active exception")."""
        self._stop.set()
        self._kick.set()
        for t in (self._thread, self._io):
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout=STORE_WAIT_S + BEAT_S + 1)

    def finish(self) -> None:
        """done(), then close(): what a rank does on its way out."""
        self.done()
        self.close()

    # -- the thread -----------------------------------------------------------------------------------------
    def _beat(self) -> bool:
        """Write this rank's beat; False when the store did not answer."""
        with self._lock:
            self.seq += 1
            doc = {"seq": self.seq, "host": self.host, "step": self.step, "tick": self.tick, "state": self.state,
                   "message": self.message}
        try:
            # no store_ok_at here: a set is sent without an answer, and lands in the socket's buffer even
            # when the link is down; only a read (_read) proves the store answers
            self.store.set(f"{PREFIX}/{self.rank}", json.dumps(doc))
            self._beats += 1
            return True
        except Exception:  # noqa: BLE001 - an unreachable store is a verdict of its own, after the bound
            return False

    def _read(self) -> None:
        keys = [f"{PREFIX}/{r}" for r in range(self.world)]
        try:
            present = [r for r, k in enumerate(keys) if self.peers[r].seq >= 0 or self.store.check([k])]
            values = self.store.multi_get([keys[r] for r in present]) if present else []
            self.store_ok_at = now = time.monotonic()  # one instant: a beat read now was alive now
        except Exception:  # noqa: BLE001
            return
        for r, raw in zip(present, values):
            try:
                doc = json.loads(bytes(raw).decode())
            except ValueError:
                continue
            p = self.peers[r]
            if doc.get("seq") != p.seq:
                p.seq, p.alive_at = doc.get("seq"), now
            if doc.get("tick") != p.tick:
                p.tick, p.step_at = doc.get("tick"), now
            p.step = doc.get("step")
            p.host, p.state, p.message = doc.get("host"), doc.get("state"), doc.get("message")

    def _io_loop(self) -> None:
        """The one thread that uses the store client: it registers this rank at once, then beats."""
        while not self._stop.is_set():
            if self._beat():  # a store that does not answer costs one STORE_WAIT_S per beat, not two
                self._read()
            self._kick.wait(BEAT_S)
            self._kick.clear()

    def _watch_loop(self) -> None:
        while not self._stop.wait(BEAT_S / 2):
            with self._lock:
                bound = stall_bound(self.stall_s, self.step_times)
                if self.state != RUNNING:
                    continue
            v = verdict(self.peers, me=self.rank, now=time.monotonic(), bound=bound,
                        store_ok_at=self.store_ok_at, store_host=self.store_host)
            if v is not None and self.fired is None:
                self.fired = v
                now = time.monotonic()
                seen = "; ".join(f"rank {p.rank} {p.host or '?'} {p.state or 'unseen'} step {p.step} beat {now - p.alive_at:.0f} s ago"
                                 for p in self.peers.values())
                print(f"stall watchdog of rank {self.rank}: {v[0]} [store answered {now - self.store_ok_at:.0f} s "
                      f"ago; {seen}]", file=sys.stderr, flush=True)
                self.on_stall(*v)
                return

    def hosts(self) -> dict[int, str | None]:
        """Each rank's host, as the heartbeat thread last read them (None: not joined)."""
        return {r: p.host for r, p in sorted(self.peers.items())}


def start(*, rank: int, world: int, host_addr: str, port: int, stall_s: float | None,
          on_stall: Callable[[str, list[int]], None] | None, connect_s: float = 60.0,
          host: str | None = None) -> Heartbeat:
    """A Heartbeat over a new client of the store at host_addr:port (the run's rendezvous store, or a
    study's), its calls bounded (jobs/tcpstore.py). on_stall None: the owner judges, by silent()."""
    store = open_store(host_addr, port, connect_s=connect_s)
    hb = Heartbeat(store, rank=rank, world=world, stall_s=stall_s, on_stall=on_stall, store_host=host_addr,
                   host=host)
    # the store host's name, for the verdict, found off the start-up path: a slow resolver would otherwise
    # hold every rank's start for up to host_name's wait; until it answers, the address is said
    threading.Thread(target=lambda: setattr(hb, "store_host", host_name(host_addr, wait_s=10.0)), daemon=True,
                     name="fabricbench-store-name").start()
    return hb


def host_name(addr: str, wait_s: float = 1.0) -> str:
    """The name of the store's host, for the verdict that names it before rank 0's beat was ever read (a
    link saturated from the first step): /etc/hosts or DNS, given wait_s at most; else the address."""
    import ipaddress

    try:
        ipaddress.ip_address(addr)
    except ValueError:
        return addr  # already a name
    found: list[str] = []

    def look() -> None:
        try:
            found.append(socket.gethostbyaddr(addr)[0])
        except OSError:
            pass

    t = threading.Thread(target=look, daemon=True)
    t.start()
    t.join(wait_s)
    return found[0] if found else addr


def from_env(*, stall_s: float | None, on_stall: Callable[[str, list[int]], None]) -> Heartbeat | None:
    """A Heartbeat for a torchrun/srun-style rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or None
    when there is one rank or no store to meet at."""
    env = os.environ
    try:
        rank, world, port = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["MASTER_PORT"])
        addr = env["MASTER_ADDR"]
    except (KeyError, ValueError):
        return None
    if world < 2:
        return None
    return start(rank=rank, world=world, host_addr=addr, port=port, stall_s=stall_s, on_stall=on_stall)


_THIS: list[Heartbeat] = []  # this process's own watchdog, when watch_this_rank started one


def watch_this_rank(stall_s: float | None) -> Heartbeat | None:
    """For a rank launched by torchrun/srun whose command has no parent of fabricbench's (a sweep, a
    qualify across nodes): start this process's watchdog once. Its verdict is one `Error:` line naming
    the rank and host that stopped, then this rank exits (STALL_EXIT); what it wrote before stays. Done
    at exit, so a rank that finished is never named for its silence."""
    if _THIS:
        return _THIS[0]
    hb = from_env(stall_s=stall_s, on_stall=_end_this_rank)
    if hb is not None:
        _THIS.append(hb)
        atexit.register(hb.finish)
    return hb


def _end_this_rank(message: str, ranks: list[int]) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.write(f"Error: {message}; rank {_THIS[0].rank if _THIS else '?'} ends the run\n")
        sys.stderr.flush()
    finally:
        os._exit(STALL_EXIT)
