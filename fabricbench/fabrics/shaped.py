"""shaped:RATE — an emulated fabric: a network namespace of its own whose loopback is rate-limited by tc.

    fabricbench sweep --engine torch --backend gloo --nprocs 2 --fabric shaped:200mbit --sizes 1M-16M:x4
    fabricbench compare --fabrics default,shaped:1gbit,shaped:200mbit --engine torch --backend gloo --nprocs 2
    fabricbench train --device cpu --nprocs 2 --fabric shaped:500mbit ...

Applying it (fabricbench/fabrics/apply.py) runs, as root:
    ip netns add fb-<pid>-<start time>-<random>
    ip netns exec NS ip link set lo up
    ip netns exec NS tc qdisc add dev lo root tbf rate R burst 256kb latency 100ms
and starts the measured processes under `ip netns exec NS`. Every rank talks over that loopback: gloo
(GLOO_SOCKET_IFNAME=lo) and NCCL's socket transport (P2P and SHM off, NCCL_SOCKET_IFNAME=lo). Both
directions share lo's one queue, so from 1 MiB up an all-reduce's busbw is R/2 (docs/domain.md).

The namespace is removed when the run ends: on success, failure, Ctrl-C and SIGTERM. A SIGKILLed
parent cannot remove it, so every start first removes the fb-<pid>-* namespaces whose process is gone
(remove_stale; the start time in the name tells a reused pid apart), one start at a time (reaping_lock).
Only namespaces named fb-* are ever created or removed; the host's interfaces are never touched. Without
root, `ip`, `tc` or network namespaces the fabric is waived (FabricWaived), and nothing else fails.

Choose rates well below what the unshaped loopback carries (`fabricbench compare --fabrics default,...`):
a rate above it shapes nothing. On a 2-core machine gloo reaches ~0.2 GB/s busbw (~1.6 gbit of rate).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from fabricbench.errors import FabricWaived, UsageError
from fabricbench.fabrics.model import Fabric, FabricFamily
from fabricbench.outputs import open_output

PREFIX = "fb-"
# tc's kb: kilobytes of 1024 B. Large enough for a 10 gbit rate at the kernel's timer resolution, and no
# smaller will do: lo's 64 KiB packets larger than the burst are dropped (a 32kb burst stalls gloo). The
# bucket refills while the link idles, so a collective that follows compute sends its first BURST_BYTES
# at loopback speed, a sweep's back-to-back calls do not: relate prices that credit (relating/model.py).
BURST_BYTES = 256 * 1024
BURST = f"{BURST_BYTES // 1024}kb"
LATENCY = "100ms"  # how long a packet may wait in the queue before tbf drops it
IP_TIMEOUT_S = 15.0
# Test hook: a reason here makes capability() report the fabric as unavailable, as a machine without
# root would (the CPU tier checks the waived path on a machine that has root).
WAIVE_ENV = "FABRICBENCH_SHAPED_WAIVE"

# tc(8) rate units: SI prefixes are powers of 1000, IEC (ki, mi, gi, ti) of 1024; "bps" is bytes/s.
_PREFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
           "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g|t|ki|mi|gi|ti)?(bit|bps)$")
MIN_RATE_BPS = 8_000  # 1 kB/s: below this a 1 MiB message takes minutes
MAX_RATE_BPS = 10**12 * 10  # 10 tbit: beyond what loopback itself can do


def parse_rate(text: str) -> int:
    """'200mbit' -> 200_000_000; '1gibit' -> 2**30; '10mbps' -> 80_000_000 (bit/s, as tc reads them)."""
    t = text.strip().lower()
    m = _RATE.match(t)
    if not m:
        raise UsageError(f"shaped:{text}: not a tc rate; write e.g. shaped:200mbit, shaped:1gbit "
                         f"(units bit, kbit, mbit, gbit, tbit, kibit.., bps = bytes/s)")
    value = float(m.group(1)) * _PREFIX[m.group(2) or ""] * (8 if m.group(3) == "bps" else 1)
    if value != int(value):
        raise UsageError(f"shaped:{text} is not a whole number of bit/s")
    bps = int(value)
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise UsageError(f"shaped:{text} = {bps} bit/s; choose between 8kbit and 10tbit")
    return bps


def format_rate(bps: int) -> str:
    """200_000_000 -> '200mbit' (the shortest exact SI form)."""
    for suffix, unit in (("tbit", 10**12), ("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps % unit == 0:
            return f"{bps // unit}{suffix}"
    return f"{bps}bit"


def capability() -> str | None:
    """Why a shaped fabric cannot be applied here (None: it can). Detected, never learned by failing."""
    forced = os.environ.get(WAIVE_ENV)
    if forced:
        return forced
    if os.geteuid() != 0:
        return "shaped fabrics need root (ip netns add, tc): run as root or choose another fabric"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"shaped fabrics need iproute2 ({', '.join(missing)} not found): install iproute2"
    res = run_ip(["netns", "list"], check=False)
    if res.returncode != 0:
        return f"network namespaces do not work here (`ip netns list`: {res.stderr.strip() or res.returncode})"
    return None


@dataclass(frozen=True, kw_only=True)
class ShapedFabric(Fabric):
    """A Fabric whose processes run in a fresh network namespace with a tbf-shaped loopback."""

    @property
    def burst_bytes(self) -> int:
        """The token bucket's depth: what the link banks while idle (relate's link credit)."""
        return BURST_BYTES

    def unavailable(self) -> str | None:
        return capability()

    @contextlib.contextmanager
    def isolation(self) -> Iterator[str | None]:
        assert self.rate_bps is not None
        remove_stale()
        ns = f"{PREFIX}{os.getpid()}-{start_time(os.getpid())}-{secrets.token_hex(3)}"
        made = run_ip(["netns", "add", ns], check=False)
        if made.returncode != 0:
            raise FabricWaived(f"fabric {self.name}: `ip netns add {ns}` failed: {made.stderr.strip()}")
        try:
            run_ip(["netns", "exec", ns, "ip", "link", "set", "lo", "up"])
            run_ip(["netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                 f"{self.rate_bps}bit", "burst", BURST, "latency", LATENCY])
            yield ns
        finally:
            remove(ns)


def make(spec: str) -> Fabric:
    """'shaped:200mbit' -> the fabric (the registry's parser for the shaped family)."""
    _, _, rate_text = spec.partition(":")
    bps = parse_rate(rate_text)
    name = f"shaped:{format_rate(bps)}"
    return ShapedFabric(
        name=name,
        # InfiniBand is not a network device of the namespace (RDMA ignores it): off, so NCCL's only
        # way between ranks is sockets over the shaped loopback.
        env=(("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_IB_DISABLE", "1"),
             ("NCCL_SOCKET_IFNAME", "lo"), ("GLOO_SOCKET_IFNAME", "lo")),
        description=f"loopback of a network namespace shaped to {format_rate(bps)} (tc tbf); gloo and "
                    f"NCCL sockets only: all-reduce busbw is about half the rate",
        expected="NET/Socket",
        forbidden=("P2P", "SHM", "NET/IB", "NVLS"),
        rate_bps=bps,
    )


def remove(ns: str) -> None:
    """Remove one of our namespaces; never raises (it runs on the way out of failures and Ctrl-C)."""
    assert ns.startswith(PREFIX)
    try:
        run_ip(["netns", "del", ns], check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def _lock_path() -> str:
    """Host-wide, as the namespaces are: never under TMPDIR, which the job layer (FABRICBENCH_JOB_CHANNEL)
    and tests set per run, so that two starts with different TMPDIRs would each take a lock of their own."""
    for folder in ("/run/lock", "/var/lock", "/tmp"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return os.path.join(folder, "fabricbench-netns.lock")
    return os.path.join(tempfile.gettempdir(), "fabricbench-netns.lock")


LOCK = _lock_path()
LOCK_WAIT_S = 10.0  # then reap without it: a holder that hangs must not hang every start
_holding = threading.local()  # .depth: how deep this thread is inside reaping_lock (0: not holding it)


@contextlib.contextmanager
def reaping_lock(wait_s: float | None = None) -> Iterator[bool]:
    """Held while stale namespaces are reaped, so that one start on a host reaps at a time, and a caller that
    holds it (a test that SIGKILLs a run to see its namespace stay) keeps the others' reapers off meanwhile.
    Yields whether it got the lock: after wait_s (LOCK_WAIT_S) without it, or where the lock file cannot be
    opened, the caller goes on without (reaping is best effort; `ip netns del` of a gone namespace is harmless).
    Re-entrant in a thread that holds it (a flock of a second open would wait for the first): a caller that
    holds it can make namespaces and reap them (remove_stale) with no other start reaping in between."""
    if getattr(_holding, "depth", 0):
        _holding.depth += 1
        try:
            yield True
        finally:
            _holding.depth -= 1
        return
    try:  # a host-wide file in a shared folder, opened as root: never through a link someone planted there
        fh = open_output(LOCK, "a", what="namespace lock")
    except (OSError, UsageError):
        yield False
        return
    with fh:
        deadline, got = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s), False
        while not got:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got = True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            except OSError:
                break
        _holding.depth = 1 if got else 0
        try:
            yield got
        finally:
            _holding.depth = 0
            if got:
                fcntl.flock(fh, fcntl.LOCK_UN)


def remove_stale(wait_s: float | None = None) -> list[str]:
    """Remove the fb-<pid>-<start>-* namespaces whose creating process is gone (a SIGKILLed run); return them.
    Under reaping_lock (waiting up to wait_s for it, LOCK_WAIT_S by default)."""
    with reaping_lock(wait_s):
        return _remove_stale()


def _remove_stale() -> list[str]:
    try:
        res = run_ip(["netns", "list"], check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    gone = []
    for line in res.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NAME.fullmatch(name)
        # The creator's start time rules out a pid reused by an unrelated process since.
        if m and (not _alive(int(m.group(1))) or start_time(int(m.group(1))) != int(m.group(2))):
            remove(name)
            gone.append(name)
    return gone


def namespaces() -> list[str]:
    """Our namespaces that exist now (for tests and diagnostics)."""
    res = run_ip(["netns", "list"], check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.startswith(PREFIX)]


_NAME = re.compile(rf"{PREFIX}(\d+)-(\d+)-[0-9a-f]+")  # fb-<pid>-<its start time>-<random>


def start_time(pid: int) -> int:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22); -1 when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return -1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0): it is dead for our purpose (its namespace is no longer in use).
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def run_ip(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and res.returncode != 0:
        raise FabricWaived(f"`ip {' '.join(args)}` failed: {res.stderr.strip() or res.returncode}")
    return res


FAMILY = FabricFamily(
    name="shaped", syntax="shaped:RATE", make=make, example="1gbit",
    description="emulated link: a network namespace whose loopback tc shapes to RATE (e.g. 200mbit, 1gbit); "
                "gloo and NCCL sockets; needs root and iproute2")
