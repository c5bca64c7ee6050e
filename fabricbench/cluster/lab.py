"""An emulated cluster on one machine: N network namespaces ("nodes") joined by veth pairs to a bridge in a
switch namespace, each node's link shaped by tc to play the inter-node network; every command a node runs
gets a private hostname (a UTS namespace) and the nodes find each other by name (/etc/netns/NS/hosts).

    python3 -m pytest -q -m multinode tests/e2e/test_multinode.py
    with cluster(2, rate="1gbit") as nodes:
        nodes[0].name, nodes[0].addr                           # "node0", "10.77.0.1"
        p = nodes[1].popen([sys.executable, "-m", "fabricbench", "train", "--nnodes", "2", ...])
        nodes[1].kill()                                        # a node killed (loudly)
        nodes[1].unplug()                                      # its link down (silently)

What it runs, as root (shaped.py's conventions: namespaces named fb-<pid>-<start time>-<hex>, so a run
that was SIGKILLed is cleaned by the next start's shaped.remove_stale):
    ip netns add fb-...-<hex>0 ... fb-...-<hex>N (N: the switch)
    ip -n SWITCH link add br0 type bridge; ip link add ... type veth peer ...; tc qdisc add dev eth0 root
    tbf rate RATE ...  (both ends: the node's eth0 and its port on the bridge)
    ip netns exec NODE unshare --uts sh -c 'hostname node1; exec "$@"' ...
Everything it made is removed on the way out: its processes (each command is a process group of its
own), the namespaces (their veths go with them) and the /etc/netns folders. The host's interfaces are
never touched. `unavailable()` says why it cannot run here (no root, no ip/tc/unshare, no namespaces).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from fabricbench import procs
from fabricbench.fabrics import shaped

SUBNET = "10.77.0"
NETNS_ETC = Path("/etc/netns")
MAX_NODES = 8
# How long a packet may queue at a node's link before tbf drops it. Longer than the shaped fabric's 100 ms:
# a training step's gradients fill the queue, and dropped packets of the store's heartbeat wait out TCP's
# retransmission back-off (0.2, 0.4, 0.8 ... s), which starved a 10 s stall bound in this lab.
LINK_LATENCY = "1s"


def unavailable() -> str | None:
    """Why the lab cannot be built here (None: it can). Detected, never learned by failing."""
    why = shaped.capability()
    if why:
        return why
    if shutil.which("unshare") is None:
        return "the multi-node lab needs unshare (util-linux) for a hostname per node"
    return None


@dataclass
class Node:
    index: int
    name: str  # its hostname, inside its commands
    ns: str  # its network namespace
    addr: str  # its address on the lab's network
    procs: list[subprocess.Popen] = field(default_factory=list)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """argv run on this node: in its namespace, under its own hostname."""
        return ["ip", "netns", "exec", self.ns, "unshare", "--uts", "--", "sh", "-c",
                'hostname "$0" && exec "$@"', self.name, *argv]

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start argv on this node, in a process group of its own (kill() ends it and what it started)."""
        p = subprocess.Popen(self.argv(argv), start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The node dies: every process it runs gets `sig` (SIGKILL: loudly; SIGSTOP: frozen)."""
        for p in self.procs:
            for pid in _tree(p.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def unplug(self) -> None:
        """Its link goes down: its processes live on, nothing reaches the other nodes."""
        shaped.run_ip(["-n", self.ns, "link", "set", "eth0", "down"])


def _tree(pid: int) -> list[int]:
    """pid and its descendants (torchrun's ranks run in sessions of their own: a group kill misses them)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += procs.children(p)
    return out


@contextlib.contextmanager
def cluster(n: int = 2, *, rate: str = "1gbit", names: Sequence[str] | None = None) -> Iterator[list[Node]]:
    """n nodes on a switch, each link shaped to `rate` (tc's syntax); removed with all it ran on exit."""
    assert 2 <= n <= MAX_NODES
    why = unavailable()
    if why:
        raise RuntimeError(why)
    bps = shaped.parse_rate(rate)
    reap_stale()
    base = f"{shaped.PREFIX}{os.getpid()}-{shaped.start_time(os.getpid())}-{secrets.token_hex(3)}"
    switch = f"{base}f"
    nodes = [Node(i, (names or [f"node{k}" for k in range(n)])[i], f"{base}{i}", f"{SUBNET}.{i + 1}")
             for i in range(n)]
    made: list[str] = []
    try:
        for ns in [switch, *(nd.ns for nd in nodes)]:
            shaped.run_ip(["netns", "add", ns])
            made.append(ns)
            shaped.run_ip(["-n", ns, "link", "set", "lo", "up"])
        shaped.run_ip(["-n", switch, "link", "add", "br0", "type", "bridge"])
        shaped.run_ip(["-n", switch, "link", "set", "br0", "up"])
        hosts = "127.0.0.1 localhost\n" + "".join(f"{nd.addr} {nd.name}\n" for nd in nodes)
        for nd in nodes:
            port = f"p{nd.index}"
            # both ends made inside the switch, then one moved: no name is ever made in the host's namespace
            shaped.run_ip(["-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", nd.ns])
            shaped.run_ip(["-n", switch, "link", "set", port, "master", "br0"])
            shaped.run_ip(["-n", switch, "link", "set", port, "up"])
            shaped.run_ip(["-n", nd.ns, "addr", "add", f"{nd.addr}/24", "dev", "eth0"])
            shaped.run_ip(["-n", nd.ns, "link", "set", "eth0", "up"])
            for ns, dev in ((nd.ns, "eth0"), (switch, port)):  # each direction of the node's link
                _tc(ns, dev, bps)
            etc = NETNS_ETC / nd.ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)
            (etc / "hostname").write_text(nd.name + "\n")
        yield nodes
    finally:
        for nd in nodes:
            nd.kill(signal.SIGCONT)
            nd.kill(signal.SIGKILL)
            for p in nd.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=10)
        for ns in made:
            shaped.remove(ns)
        for nd in nodes:
            shutil.rmtree(NETNS_ETC / nd.ns, ignore_errors=True)


_NAME = re.compile(rf"{shaped.PREFIX}(\d+)-(\d+)-[0-9a-f]+")  # fb-<pid>-<its start time>-<hex>


def reap_stale() -> list[str]:
    """A SIGKILLed run's leftovers: the processes still in its namespaces (torchrun's ranks, a Slurm's
    daemons and steps: nothing kills them when the namespace's name goes), then the namespaces
    (shaped.remove_stale) and their /etc/netns folders. Under shaped's reaping lock, one start at a time."""
    with shaped.reaping_lock():
        for ns in shaped.namespaces():
            if _stale(ns):
                for pid in namespace_pids(ns):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        gone = shaped.remove_stale()
        if NETNS_ETC.is_dir():
            for d in NETNS_ETC.glob(f"{shaped.PREFIX}*"):
                if _stale(d.name) and d.name not in shaped.namespaces():
                    shutil.rmtree(d, ignore_errors=True)
                    gone.append(str(d))
        return gone


def _stale(name: str) -> bool:
    """Whether a fb-<pid>-<start>-* name's creator is gone (its start time rules out a reused pid)."""
    m = _NAME.match(name)
    return bool(m) and shaped.start_time(int(m.group(1))) != int(m.group(2))


def namespace_pids(ns: str) -> list[int]:
    """Every process in network namespace `ns` (`ip netns pids`); [] when it is gone."""
    try:
        res = shaped.run_ip(["netns", "pids", ns], check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(x) for x in res.stdout.split() if x.isdigit()]


def _tc(ns: str, dev: str, bps: int) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                    f"{bps}bit", "burst", shaped.BURST, "latency", LINK_LATENCY], check=True,
                   capture_output=True, timeout=shaped.IP_TIMEOUT_S)


def leftovers(nodes: Sequence[Node]) -> list[str]:
    """What of the lab still exists (for tests): namespaces, /etc/netns folders, live processes."""
    out = [nd.ns for nd in nodes if nd.ns in shaped.namespaces()]
    out += [str(NETNS_ETC / nd.ns) for nd in nodes if (NETNS_ETC / nd.ns).exists()]
    for nd in nodes:
        out += [f"pid {p.pid}" for p in nd.procs if p.poll() is None]
    return out


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> float:
    """Wait for every process; the seconds it took (raises subprocess.TimeoutExpired past `timeout`)."""
    t0 = time.monotonic()
    for p in procs:
        p.wait(timeout=max(0.1, timeout - (time.monotonic() - t0)))
    return time.monotonic() - t0
