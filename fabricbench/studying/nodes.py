"""A study across nodes: node 0 decides and writes, every node runs its share of each unit.

    # on node0                                              # on node1: the same, with --node-rank 1
    fabricbench study --device cpu --nprocs 2 --nnodes 2 --node-rank 0 --master-addr 10.77.0.1 \
        --master-port 29400 --strategies ddp,fsdp --model tiny-mistral --out lab/

Node 0 runs the study as on one node: it plans, picks the batch, decides on more rounds (those decisions
need the measurements, which only it holds), writes the study folder and the report. It hosts a small
TCPStore at MASTER_ADDR:MASTER_PORT; the other nodes join it and then do what node 0 posts, one child
at a time (a unit may have several):
- "span": the child is one job across the nodes (train --nnodes, or a sweep under torchrun), each node
  starting its own ranks with its own --node-rank; node 0's ranks write the records. The jobs meet on
  MASTER_PORT + 1, one after another.
- "each": every node runs the child for itself (the machine unit) and sends its output back, so the
  study holds every node's versions and topology.
Units only node 0 runs (estimate, batch, relate, summary, the one-node sweep) are never posted. A
follower writes nothing: its children write into a temporary folder of its own (NODE_DIR in the argv
node 0 posts), removed at the end, so a shared --out is never written twice.

Faults end every surviving node and name the node:
- a node that never joins: node 0 waits --join-timeout for all, then names the missing ones; a follower
  whose node 0 does not answer gives up after --join-timeout, naming node 0;
- a node that dies or goes silent: each node beats as a rank does (jobs/heartbeat.Heartbeat, one "rank"
  per node, through the same store); a peer whose beat stands still for the stall bound
  (jobs/heartbeat.stall_bound: --stall-timeout, else its floor) is named, the child running is killed,
  the unit recorded as an error and the study ends (its finished units kept, the report written by node
  0). The store's host going away is node 0 dying, said as such (jobs/heartbeat.store_host_gone).
Every store call is bounded (jobs/tcpstore.py): a node cut off mid-call is named, not waited for.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fabricbench.errors import FabricbenchError
from fabricbench.jobs import heartbeat
from fabricbench.jobs.tcpstore import STORE_ERRORS, STORE_WAIT_S, Calls, open_store

NODE_DIR = "@NODE_DIR@"  # in a posted argv: where the follower's children write (its own temp folder)
POLL_S = 0.25
SLACK_S = 15.0  # a child's own watchdog's reaction time beyond its stall bound
MAX_OUT = 1 << 20  # a child's stdout sent back ("each" units print one JSON document)


class NodeLost(FabricbenchError):
    """A node of the study stopped answering or never came: the study cannot go on."""


class ShareFailed(FabricbenchError):
    """A follower's share of a spanning child failed and node 0's did not end by itself: the unit failed,
    the study goes on."""


@dataclass(kw_only=True)
class Link:
    """This node's side of the study's store: the jobs it posts or reads (calls bounded on a thread of
    their own, jobs/tcpstore.Calls) and its beat, the ranks' heartbeat (jobs/heartbeat.Heartbeat, one
    "rank" per node), whose watch reads what its thread last learnt and never waits on the store."""

    calls: Calls
    beat: heartbeat.Heartbeat
    stall_s: float
    where: str  # the store's address, for messages
    hosts: dict[int, str] = field(default_factory=dict)

    def watch(self, nodes: list[int], bound_s: float | None = None) -> None:
        """Raise NodeLost for the first of `nodes` whose beat stood still for `bound_s` (default the stall
        bound), or when the store itself is gone. Called while waiting, as often as one likes."""
        found = self.beat.silent(nodes, self.stall_s if bound_s is None else bound_s)
        if found is not None:
            n, quiet = found
            raise self.store_lost() if n is None else self.lost(n, f"no beat for {quiet:.0f} s")

    def lost(self, n: int, why: str) -> NodeLost:
        """Node n's loss, named with its host, to raise."""
        host = self.hosts.get(n)
        return NodeLost(f"node {n}{f' ({host})' if host else ''} stopped answering: {why}; the study ends here")

    def store_lost(self, why: BaseException | None = None) -> NodeLost:
        """The store lives in node 0's process: its going is node 0's (jobs/heartbeat's one sentence)."""
        host = self.hosts.get(0)
        gone = heartbeat.store_host_gone(f"node 0 ({f'{host}, ' if host else ''}{self.where})",
                                         time.monotonic() - self.beat.store_ok_at)
        return NodeLost(f"{gone}{f' ({type(why).__name__})' if why else ''}; the study ends here")

    def call(self, method: str, *args: Any) -> Any:
        """One call to the store; NodeLost (node 0's) when it fails or gets no answer."""
        try:
            return self.calls(method, *args)
        except STORE_ERRORS as e:
            raise self.store_lost(e) from None

    def wait_for(self, key: str, *, nodes: list[int], until: float | None = None) -> str:
        """The value of `key` once set, watching `nodes` meanwhile; NodeLost when one goes, TimeoutError at
        `until` (a monotonic time)."""
        while True:
            if self.call("check", [key]):
                return self.call("get", key).decode()
            self.watch(nodes)
            if until is not None and time.monotonic() > until:
                raise TimeoutError(key)
            time.sleep(POLL_S)

    def close(self) -> None:
        self.beat.close()


def host_store(addr: str, port: int) -> Any:
    try:
        return open_store(addr, port, host=True, connect_s=STORE_WAIT_S)
    except STORE_ERRORS as e:  # the port taken, or an address not of this node
        raise FabricbenchError(f"node 0 cannot host the study's store at {addr}:{port} ({e}); is --master-addr "
                               f"this node's address, and --master-port free here?") from None


def join_store(addr: str, port: int, timeout_s: float, node: int) -> Any:
    """A client of node 0's store, once its port answers; within timeout_s from now, else NodeLost. The
    port is tried by hand: TCPStore's own connect spends its timeout more than once."""
    deadline = time.monotonic() + timeout_s
    why = "nothing listens there"
    while True:
        try:
            with socket.create_connection((addr, port), timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                break
        except OSError as e:
            why = e.strerror or type(e).__name__
        if time.monotonic() >= deadline:
            raise NodeLost(f"node 0 did not answer at {addr}:{port} within --join-timeout {timeout_s:g} s "
                           f"(this is node {node}; {why}): start node 0's study, or check --master-addr and "
                           f"--master-port")
        time.sleep(POLL_S)
    try:
        return open_store(addr, port, connect_s=max(STORE_WAIT_S, deadline - time.monotonic()))
    except STORE_ERRORS as e:
        raise NodeLost(f"node 0's study store at {addr}:{port} did not answer ({type(e).__name__}: {e})") from None


def link(store: Any, *, addr: str, port: int, node: int, nnodes: int, stall_s: float) -> Link:
    """This node's Link over `store` (the server on node 0, a client elsewhere): its beat is a client of
    its own, so that a beat never waits behind a job's call."""
    try:
        beat = heartbeat.start(rank=node, world=nnodes, host_addr=addr, port=port, stall_s=stall_s, on_stall=None,
                               connect_s=STORE_WAIT_S)
    except STORE_ERRORS as e:
        raise NodeLost(f"node 0's study store at {addr}:{port} did not answer ({type(e).__name__}: {e})") from None
    return Link(calls=Calls(store), beat=beat, stall_s=stall_s, where=f"{addr}:{port}")


@dataclass(kw_only=True)
class Crew:
    """Node 0's side: the store, the followers it waits for, and the children it posts to them."""

    link: Link
    nnodes: int
    join_timeout_s: float
    posted: int = 0
    _failed: dict[str, tuple[float, int, dict[str, Any]]] = field(default_factory=dict)

    @property
    def followers(self) -> list[int]:
        return list(range(1, self.nnodes))

    @classmethod
    def lead(cls, *, addr: str, port: int, nnodes: int, join_timeout_s: float, stall_s: float) -> "Crew":
        store = host_store(addr, port)
        crew = cls(link=link(store, addr=addr, port=port, node=0, nnodes=nnodes, stall_s=stall_s), nnodes=nnodes,
                   join_timeout_s=join_timeout_s)
        crew.link.hosts[0] = socket.gethostname()
        crew.link.call("set", "hello/0", json.dumps({"host": crew.link.hosts[0]}))
        crew._meet(addr, port)
        return crew

    def _meet(self, addr: str, port: int) -> None:
        deadline = time.monotonic() + self.join_timeout_s
        while True:
            here = [n for n in self.followers if self.link.call("check", [f"hello/{n}"])]
            if len(here) == len(self.followers):
                break
            if time.monotonic() > deadline:
                missing = [n for n in self.followers if n not in here]
                self.close(exit_code=1)
                raise NodeLost(f"node(s) {', '.join(map(str, missing))} did not join the study within "
                               f"--join-timeout {self.join_timeout_s:g} s ({len(here) + 1} of {self.nnodes} "
                               f"nodes at {addr}:{port}); start the study on every node with its --node-rank")
            time.sleep(POLL_S)
        for n in self.followers:
            self.link.hosts[n] = json.loads(self.link.call("get", f"hello/{n}").decode()).get("host") or "?"

    @property
    def hosts(self) -> list[str]:
        return [self.link.hosts.get(n, "?") for n in range(self.nnodes)]

    def post(self, unit: str, mode: str, argv_of: Callable[[int], list[str]], fabric: str | None,
             budget_s: float) -> int:
        """Post one child for every follower (argv_of(node) for each); returns its number for collect()."""
        k = self.posted
        self.posted += 1
        job = {"unit": unit, "mode": mode, "fabric": fabric, "budget_s": budget_s,
               "argv": {str(n): argv_of(n) for n in self.followers}}
        self.link.call("set", f"job/{k}", json.dumps(job))
        return k

    def collect(self, k: int, budget_s: float) -> dict[int, dict[str, Any]]:
        """Each follower's result of child k ({rc, timed_out, stdout, tail, host}); NodeLost when one goes
        silent or takes past the child's own budget (plus the stall bound) to answer."""
        until = time.monotonic() + budget_s + self.link.stall_s
        out = {}
        for n in self.followers:
            try:
                out[n] = json.loads(self.link.wait_for(f"done/{k}/{n}", nodes=self.followers, until=until))
            except TimeoutError:
                raise self.link.lost(n, f"no result of its share in {budget_s + self.link.stall_s:.0f} s") from None
        return out

    def watch_share(self, k: int) -> None:
        """While node 0's share of child k runs: a follower silent for twice the stall bound (plus start-up
        slack) ends it, NodeLost; so does a follower whose share failed, once ours has had the stall bound
        to end by itself (ShareFailed). Both later than the child's own watchdog, which names the dead rank
        and keeps the finished steps in its record."""
        self.link.watch(self.followers, bound_s=2 * self.link.stall_s + SLACK_S)
        for n in self.followers:
            key = f"done/{k}/{n}"
            if key in self._failed or not self.link.call("check", [key]):
                continue
            res = json.loads(self.link.call("get", key).decode())
            if res.get("rc") != 0:
                self._failed[key] = (time.monotonic(), n, res)
        for key, (t, n, res) in self._failed.items():
            if key.startswith(f"done/{k}/") and time.monotonic() - t > self.link.stall_s + SLACK_S:
                tail = [ln for ln in (res.get("tail") or "").splitlines() if ln.strip()]
                raise ShareFailed(f"node {n} ({self.link.hosts.get(n)}): its share ended with exit {res.get('rc')}"
                                  + (f": {tail[-1][:300]}" if tail else ""))

    def close(self, exit_code: int) -> None:
        """Tell the followers the study is over (they exit with `exit_code`), then stop beating. The store
        lives in this process: give them a moment to read the word before it goes."""
        try:
            self.link.calls("set", f"job/{self.posted}", json.dumps({"end": True, "exit": exit_code}))
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and not all(
                    self.link.calls("check", [f"bye/{n}"]) for n in self.followers):
                time.sleep(POLL_S)
        except STORE_ERRORS:  # the store gave no answer: no follower can be told; they see node 0 go
            pass
        finally:
            self.link.close()


def follow(*, addr: str, port: int, node: int, nnodes: int, join_timeout_s: float, stall_s: float,
           run_child: Callable[[dict[str, Any], Callable[[], None]], dict[str, Any]]) -> int:
    """A follower's whole study: join, run each posted child (run_child(job, watch) -> its result; `watch`
    raises NodeLost when node 0 goes), answer, until node 0 says the end. Returns node 0's exit status."""
    store = join_store(addr, port, join_timeout_s, node)
    me = link(store, addr=addr, port=port, node=node, nnodes=nnodes, stall_s=stall_s)
    host = socket.gethostname()
    try:
        me.call("set", f"hello/{node}", json.dumps({"host": host}))
        try:
            me.hosts[0] = json.loads(me.wait_for("hello/0", nodes=[], until=time.monotonic() + join_timeout_s)
                                     ).get("host")
        except TimeoutError:
            raise NodeLost(f"node 0 at {addr}:{port} did not start the study within --join-timeout "
                           f"{join_timeout_s:g} s") from None
        k = 0
        while True:
            job = json.loads(me.wait_for(f"job/{k}", nodes=[0]))
            if job.get("end"):
                me.call("set", f"bye/{node}", "1")
                return int(job.get("exit") or 0)
            res = run_child(job, lambda: me.watch([0]))
            res["host"] = host
            res["stdout"] = (res.get("stdout") or "")[-MAX_OUT:]
            me.call("set", f"done/{k}/{node}", json.dumps(res))
            k += 1
    finally:
        me.close()


def node_argv(argv: list[str], node_dir: Path) -> list[str]:
    """A posted argv with NODE_DIR made this follower's own folder."""
    return [a.replace(NODE_DIR, str(node_dir)) for a in argv]
