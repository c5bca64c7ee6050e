"""The host's load from other processes during a run, read from /proc, and whether it made the host busy.

    with hostload.watch() as w:          # this process and every process it starts are "ours"
        jobs.run(argv, ...)
    w.load.to_dict()                     # {"others_cpus": 1.31, "busy": true, "threshold_cpus": 0.5, ...}

A figure measured while another job loads the machine is that job's as much as ours (one CPU-lab unit
measured 69 and then 136-141 samples/s minutes apart). So every run is watched: a thread reads
/proc/<pid>/stat of every process once a second; a process is ours when it is this one or descends from it
(its parent ours when first seen; once ours, ours until it ends). The others' CPU time over the window
(user + system, each process from its first sighting, or from zero when it started inside the window) over
the window's length is `others_cpus`: how many CPUs the other processes kept busy on average.

Why this measure: /proc/loadavg counts our own ranks among the runnable tasks and decays over a minute,
so it can tell neither whose the load is nor what it was during a 20 s run; /proc/stat's total less our
tree's time would be cheaper but cannot name who loaded the host. Per process, each reading costs about
45 us per user process (3 ms on a 2-core box of 70; kernel threads are read once), so a 1000-process
node spends about 5% of one core on it, in the process that launches the ranks (a one-process sweep: a
thread beside its measurements). A sweep's record carries a lap (`lap`): the load over the last LAP_S
seconds or more, as its measurements are often shorter than a reading's tick. On a GPU run it is
the same CPU-side figure: the ranks' host threads (launches, data loading, gloo) are what another job
slows.

Steal time (/proc/stat's `steal`: CPU time the hypervisor gave another guest while this VM wanted it) is
read beside it as `steal_cpus`, and counts toward busy: on a cloud VM the processes that slow a run may sit
outside it, where no /proc/<pid> shows them (one ZeRO-2 run of a GPU lab, on a VM quiet by the process
readings, stepped 27% slower than the same run minutes before, on one H100 machine, recorded before steal was
read). Contention that takes no CPU time (caches, memory bandwidth) shows in neither.

The threshold (stated in every record): the host is busy when the others and the steal time used at
least BUSY_SHARE of its CPUs on average, and never less than BUSY_MIN_CPUS (half a CPU: on a 2-core lab one
rank's core is then half taken). Kernel threads are left out (they mostly serve processes, ours included:
loopback traffic), and a process that starts and ends between two readings is not seen: the figure is a
lower bound, so a run flagged busy was busy. Linux only; elsewhere nothing is recorded.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

# A busy host: other processes kept this share of its CPUs busy on average over the run. A tenth of a big
# host's cores is a whole job's worth of processes contending for the ranks' host threads, caches and
# memory bandwidth; on a small lab box the floor decides: half a CPU is half of the core a rank runs on.
BUSY_SHARE = 0.10
BUSY_MIN_CPUS = 0.5
INTERVAL_S = 1.0  # between two readings of /proc
FRESH_S = 0.5  # a lap reads /proc again only when the last reading is older (a reading costs milliseconds)
LAP_S = 5.0  # a lap's shortest window: over less, one clock tick (10 ms) of another process reads as load
_KTHREAD = 0x00200000  # PF_KTHREAD in /proc/<pid>/stat's flags
TOP = 3  # the busiest other processes a record names
FIELD = "host_load"  # the record's field (declared in results/fields.py)

# what "busy host" means, where a report says it
RULE = (f"other processes and the hypervisor's steal time kept at least max({BUSY_MIN_CPUS:g} CPU, "
        f"{BUSY_SHARE:.0%} of the host's CPUs) busy on average during the run")


def threshold(cpus: int) -> float:
    """The others' average CPUs from which a host of `cpus` CPUs is busy."""
    return max(BUSY_MIN_CPUS, BUSY_SHARE * cpus)


@dataclass(kw_only=True)
class Load:
    window_s: float  # the run's length as watched
    cpus: int  # the host's CPUs
    others_cpu_s: float  # CPU seconds of processes outside this one's tree over the window
    ours_cpu_s: float  # the same for this process and its descendants (the run)
    others_cpus: float  # others_cpu_s / window_s: CPUs the other processes kept busy on average
    threshold_cpus: float
    busy: bool
    readings: int
    top: list[dict[str, Any]] = field(default_factory=list)  # [{pid, name, cpus}], the busiest others
    steal_cpus: float | None = None  # CPUs the hypervisor withheld on average (steal time); None: not read

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("window_s", "others_cpu_s", "ours_cpu_s", "others_cpus", "threshold_cpus", "steal_cpus"):
            d[k] = round(d[k], 3) if d[k] is not None else None
        if d["steal_cpus"] is None:
            del d["steal_cpus"]
        return d


def _steal(d: dict[str, Any]) -> str:
    """The clause a note adds for the hypervisor's steal time where it withheld any CPU; else ''."""
    v = d.get("steal_cpus") or 0
    return f", and the hypervisor withheld {v:.2f} (steal time)" if v >= 0.005 else ""


def note(load: Any) -> str | None:
    """The sentence a busy host earns (a Load or its dict, as records hold it); None when it was quiet."""
    d = load.to_dict() if isinstance(load, Load) else load
    if not isinstance(d, dict) or not d.get("busy"):
        return None
    who = ", ".join(f"{t.get('name')} (pid {t.get('pid')}) {t.get('cpus', 0):.2f}" for t in d.get("top") or [])
    return (f"other processes used {d.get('others_cpus', 0):.2f} of {d.get('cpus')} CPUs on average{_steal(d)} "
            f"(busy from {d.get('threshold_cpus', 0):.2f})" + (f"; the busiest: {who}" if who else ""))


def records_note(records: Any) -> str | None:
    """One sentence for a run of many records (a sweep's, a compare's fabric): how many were measured on
    a busy host and the busiest load; None when none was."""
    loads = list(map(of, records))
    busy = [d for d in loads if d and d.get("busy")]
    if not busy:
        return None
    top = max(busy, key=lambda d: (d.get("others_cpus") or 0) + (d.get("steal_cpus") or 0))
    return (f"busy host during {len(busy)} of {len(loads)} measurement(s): other processes used up to "
            f"{top.get('others_cpus', 0):.2f} of {top.get('cpus')} CPUs{_steal(top)} "
            f"(busy from {top.get('threshold_cpus', 0):.2f})")


def of(r: Any) -> dict[str, Any] | None:
    """The load recorded with a record (a dict), or with a result object (in its `extra` or `context`,
    where results/schema.py keeps the fields its classes do not name); None where none was recorded."""
    if isinstance(r, dict):
        d = r.get(FIELD)
    else:
        d = (getattr(r, "extra", None) or {}).get(FIELD) or (getattr(r, "context", None) or {}).get(FIELD)
    return d if isinstance(d, dict) else None


def _stat(proc: str, pid: str) -> tuple[int, int, int, int, str] | None:
    """(ppid, utime + stime ticks, start ticks, flags, name) of one process; None when it is gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    f = rest.split()
    try:
        return int(f[1]), int(f[11]) + int(f[12]), int(f[19]), int(f[6]), head.partition("(")[2]
    except (IndexError, ValueError):
        return None


class Watch:
    """Readings of /proc from enter to exit in a daemon thread; `load` once exited (None off Linux)."""

    def __init__(self, *, root: int | None = None, interval_s: float = INTERVAL_S, proc: str = "/proc",
                 cpus: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        # root: whose tree is "ours" (this process); proc, cpus, clock: another /proc, CPU count and clock (tests)
        self.root, self.interval_s, self.proc = root if root is not None else os.getpid(), interval_s, proc
        self.cpus, self.clock = cpus or os.cpu_count() or 1, clock
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.first: dict[tuple[int, int], int] = {}  # (pid, start) -> ticks at first sight (0: born inside)
        self.last: dict[tuple[int, int], int] = {}
        self.names: dict[tuple[int, int], str] = {}
        self.ours: set[tuple[int, int]] = set()
        self.kthreads: set[str] = set()
        self.readings = 0
        # (clock, others' ticks, ours, steal ticks since the first reading) per reading
        self.history: list[tuple[float, int, int, int | None]] = []
        self.steal0: int | None = None  # /proc/stat's steal ticks at the first reading
        self.load: Load | None = None
        self._lock = threading.Lock()  # lap() reads from the caller's thread beside the watching one
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Watch":
        self.available = os.path.isdir(f"{self.proc}/{self.root}")
        if self.available:
            self.t0 = self.clock()
            self.start_ticks = self._uptime_ticks()
            self.read()
            self._thread = threading.Thread(target=self._loop, name="fabricbench-hostload", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self.read()
        self.load = self._result(self.clock() - self.t0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.read()

    def _uptime_ticks(self) -> int:
        try:
            with open(f"{self.proc}/uptime") as fh:
                return int(float(fh.read().split()[0]) * self.tick)
        except (OSError, ValueError, IndexError):
            return 0

    def _steal_ticks(self) -> int | None:
        """The host's steal ticks so far, all CPUs (/proc/stat's cpu line, 8th figure); None where absent."""
        try:
            with open(f"{self.proc}/stat") as fh:
                f = fh.readline().split()
            return int(f[8]) if f and f[0] == "cpu" and len(f) > 8 else None
        except (OSError, ValueError):
            return None

    def read(self) -> None:
        """One reading: every process's CPU ticks, and which are ours."""
        with self._lock:
            self._read()

    def _read(self) -> None:
        seen: dict[tuple[int, int], tuple[int, int]] = {}  # key -> (ppid, ticks)
        try:
            pids = [p for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            return
        for pid in pids:
            if pid in self.kthreads:  # read once: about half a host's processes, and they live on
                continue
            st = _stat(self.proc, pid)
            if st is not None and st[3] & _KTHREAD:
                self.kthreads.add(pid)
            if st is None or st[3] & _KTHREAD:
                continue
            ppid, ticks, start, _, name = st
            key = (int(pid), start)
            seen[key] = (ppid, ticks)
            self.names[key] = name
            if key not in self.first:
                self.first[key] = 0 if (self.readings and start >= self.start_ticks) else ticks
            self.last[key] = ticks
        by_pid = {k[0]: k for k in seen}
        ours_pids = {k[0] for k in self.ours if k in seen} | {self.root}
        grew = True
        while grew:  # a child may be listed before its parent: until no process joins
            grew = False
            for key, (ppid, _) in seen.items():
                if key[0] not in ours_pids and ppid in ours_pids:
                    ours_pids.add(key[0])
                    grew = True
        self.ours |= {by_pid[p] for p in ours_pids if p in by_pid}
        self.readings += 1
        used = {k: max(0, self.last[k] - self.first[k]) for k in self.last}
        theirs = sum(v for k, v in used.items() if k not in self.ours)
        steal = self._steal_ticks()
        if self.steal0 is None:
            self.steal0 = steal
        stolen = steal - self.steal0 if steal is not None and self.steal0 is not None else None
        self.history.append((self.clock(), theirs, sum(used.values()) - theirs, stolen))

    def lap(self, min_s: float = LAP_S) -> Load | None:
        """The load over the last `min_s` seconds or more (from the newest reading at least that old, else
        from the start), read now: what a measurement that just ended ran under (a sweep's record). None
        unless watching."""
        if self._thread is None or self.load is not None:
            return None
        if self.clock() - self.history[-1][0] >= FRESH_S:  # a burst of records shares one reading
            self.read()
        with self._lock:
            now, o1, u1, s1 = self.history[-1]
            t0, o0, u0, s0 = next((h for h in reversed(self.history) if h[0] <= now - min_s), self.history[0])
            stolen = (s1 - s0) / self.tick if s1 is not None and s0 is not None else None
            return self._load(now - t0, (o1 - o0) / self.tick, (u1 - u0) / self.tick, [], stolen)

    def cpu_s(self, pid: int) -> tuple[float, bool] | None:
        """(CPU seconds in the window, ours) of the process `pid` as watched; None when never seen."""
        keys = [k for k in self.last if k[0] == pid]
        if not keys:
            return None
        k = keys[-1]
        return max(0, self.last[k] - self.first[k]) / self.tick, k in self.ours

    def _result(self, window_s: float) -> Load:
        used = {k: max(0, self.last[k] - self.first[k]) / self.tick for k in self.last}
        others = {k: v for k, v in used.items() if k not in self.ours}
        w = max(window_s, 1e-9)
        top = sorted(((v, k) for k, v in others.items() if v > 0), reverse=True)[:TOP]
        stolen = self.history[-1][3] if self.history else None
        return self._load(window_s, sum(others.values()), sum(used.values()) - sum(others.values()),
                          [{"pid": k[0], "name": self.names.get(k, "?"), "cpus": round(v / w, 3)} for v, k in top],
                          stolen / self.tick if stolen is not None else None)

    def _load(self, window_s: float, others_s: float, ours_s: float, top: list[dict[str, Any]],
              steal_s: float | None) -> Load:
        rate = others_s / max(window_s, 1e-9)
        steal = steal_s / max(window_s, 1e-9) if steal_s is not None else None
        return Load(window_s=window_s, cpus=self.cpus, others_cpu_s=others_s, ours_cpu_s=ours_s, others_cpus=rate,
                    threshold_cpus=threshold(self.cpus), busy=rate + (steal or 0) >= threshold(self.cpus),
                    readings=self.readings, top=top, steal_cpus=steal)


def watch(**kw: Any) -> Watch:
    return Watch(**kw)
