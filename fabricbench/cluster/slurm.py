"""A real Slurm over the emulated cluster (lab.py): munge with a key of its own, slurmctld in node 0's
namespace, a slurmd in each node's namespace under the node's hostname and address, one partition.

    python3 -m pytest -q -m multinode tests/e2e/test_slurm_lab.py
    with slurm.cluster(2) as s:
        s.nodes[1].name                                       # "node1": what SLURM_JOB_NODELIST names
        p = s.popen(["srun", "--nodes", "2", "hostname"])     # on node 0, the login node, with SLURM_CONF
        s.scontrol("update", "nodename=node1", "state=down", "reason=test")

What it runs, as root (Debian's slurm-wlm 22.05 and munge: `apt-get install slurm-wlm munge`):
    munged -F -f --key-file STATE/munge/key --socket STATE/munge/socket ...     in node 0's namespace
    slurmctld -D -f STATE/slurm.conf                                            in node 0's namespace
    slurmd -D -f STATE/slurm.conf -N nodeI                                      in node I's namespace
STATE is /tmp/fabricbench-slurm-<the lab's namespace base>: its slurm.conf, munge's key, socket and seed,
slurmctld's state, each slurmd's spool, every daemon's log. Clients (srun, sbatch, scontrol) find it by
SLURM_CONF, and munge by slurm.conf's AuthInfo socket: the host's own munge and Slurm are never touched.

Everything goes on the way out: every process in the nodes' namespaces (daemons, slurmstepd and the
tasks it started, which Slurm's linuxproc tracking does not end with slurmd), the namespaces and STATE.
A SIGKILLed run's are reaped by the next start (lab.reap_stale: its namespaces' processes, then the
namespaces; here its STATE folder). `unavailable()` says in one line why it cannot run here.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from fabricbench.cluster import lab
from fabricbench.fabrics import shaped

DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
HELPERS = ("slurmscriptd",)  # slurmctld's own child, not a job's
CLIENTS = ("srun", "sbatch", "scontrol", "scancel", "squeue", "sinfo")
STATE_PREFIX = "fabricbench-slurm-"
PARTITION = "lab"
CPUS_PER_NODE = 4  # declared, not detected (slurmd's config_overrides): 2 tasks per node and 2 jobs sharing one
KILL_WAIT_S = 5  # scancel: SIGTERM, then SIGKILL this much later (slurm.conf KillWait)
READY_S = 90.0  # daemons up and every node idle
CLIENT_TIMEOUT_S = 30.0
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def _which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in _SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def unavailable() -> str | None:
    """Why a Slurm cannot be started in the lab here (None: it can). Detected, never learned by failing."""
    why = lab.unavailable()
    if why:
        return why
    missing = [n for n in (*DAEMONS, *CLIENTS, "nsenter") if _which(n) is None]
    if missing:
        return (f"the lab's Slurm needs Slurm and munge installed ({', '.join(missing)} not found): "
                "apt-get install slurm-wlm munge")
    return None


@dataclass
class Slurm:
    nodes: list[lab.Node]
    state: Path  # STATE: slurm.conf, munge, logs, spools
    conf: Path
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)  # munged, slurmctld, node0 ...

    @property
    def login(self) -> lab.Node:
        """Where users' commands run: node 0 (it reaches slurmctld and every slurmd)."""
        return self.nodes[0]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment a command of this cluster's users has: theirs, plus SLURM_CONF."""
        out = dict(os.environ if base is None else base)
        out["SLURM_CONF"] = str(self.conf)
        for k in [k for k in out if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del out[k]  # a test run inside a job of another Slurm must not lend its job to this one
        return out

    def popen(self, argv: Sequence[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        """argv on the login node, with this cluster's SLURM_CONF (srun, sbatch ... as a user types them)."""
        return self.login.popen(argv, env=self.env(env), **kw)

    def run(self, *argv: str, timeout: float = CLIENT_TIMEOUT_S, check: bool = True) -> str:
        """A Slurm client command on the login node; its stdout. Bounded: it never hangs the caller."""
        p = subprocess.run(self.login.argv(argv), env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"`{' '.join(argv)}` failed ({p.returncode}): {p.stderr.strip()[-400:]}")
        return p.stdout

    def scontrol(self, *args: str) -> str:
        return self.run("scontrol", *args)

    def node_states(self) -> dict[str, str]:
        """{node: state} as sinfo says ("idle", "alloc", "down*" ...)."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T")
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def jobs(self) -> dict[str, str]:
        """{job id: state} of every job slurmctld still knows (finished ones too, until MinJobAge)."""
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i %T")
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job`'s fields (JobState, ExitCode, Restarts, NodeList ...); {} once it is forgotten."""
        p = subprocess.run(self.login.argv(["scontrol", "-o", "show", "job", job_id]), env=self.env(),
                           capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
        return dict(re.findall(r"(\w+)=(\S*)", p.stdout)) if p.returncode == 0 else {}

    def wait_job(self, job_id: str, timeout: float) -> dict[str, str]:
        """Wait until the job has ended (completed, failed, cancelled, timed out ...); its fields."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED",
                                           "SUSPENDED", None):
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {info.get('JobState')} after {timeout} s")
            time.sleep(0.5)

    def tasks(self) -> list[int]:
        """Processes on the nodes other than the daemons and the login node's commands (srun, sbatch and
        their helpers): a job's tasks, and what jobs left. A daemon's children count (slurmd's)."""
        keep = {p.pid for nd in self.nodes for p in nd.procs} - {p.pid for p in self.daemons.values()}
        out = []
        for nd in self.nodes:
            for pid in lab.namespace_pids(nd.ns):
                if pid not in keep and _comm(pid) not in (*DAEMONS, *HELPERS) and not _under(pid, keep):
                    out.append(pid)
        return out

    def log(self, name: str) -> str:
        """A daemon's log ("slurmctld", "node1" for that node's slurmd, "munged"), for failure messages."""
        return _read(self.state / (f"{name}.log" if name in ("slurmctld", "munged") else f"{name}/slurmd.log"))


def _read(f: Path) -> str:
    try:
        return f.read_text(errors="replace")
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _under(pid: int, roots: set[int]) -> bool:
    """Whether pid descends from one of roots (a login-node command's own children: srun's helpers)."""
    for _ in range(64):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid in roots:
            return True
        if pid <= 1:
            return False
    return False


def _conf(state: Path, nodes: Sequence[lab.Node], gpus: int) -> str:
    ctl = nodes[0]
    lines = [
        "ClusterName=fabricbench-lab",
        f"SlurmctldHost={ctl.name}({ctl.addr})",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={state}/munge/socket",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill", "SwitchType=switch/none", "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        # the declared CPUs, not the host's: a 2-core machine still plays two 4-CPU nodes
        "SlurmdParameters=config_overrides",
        f"StateSaveLocation={state}/ctld", f"SlurmctldPidFile={state}/slurmctld.pid",
        f"SlurmctldLogFile={state}/slurmctld.log",
        f"SlurmdSpoolDir={state}/%n/spool", f"SlurmdPidFile={state}/%n/slurmd.pid",
        f"SlurmdLogFile={state}/%n/slurmd.log",
        "SlurmctldPort=6817", "SlurmdPort=6818",
        "SlurmctldDebug=info", "SlurmdDebug=info",
        "ReturnToService=2", f"KillWait={KILL_WAIT_S}", "InactiveLimit=0", "MinJobAge=600",
        # a job requeued (scontrol requeue) may start again at once: the lab tests resume, not the delay
        "JobRequeue=1",
        "SlurmctldTimeout=20", "SlurmdTimeout=20", "MessageTimeout=10", "Waittime=0",
        *([f"GresTypes=gpu"] if gpus else []),
        *(f"NodeName={nd.name} NodeAddr={nd.addr} NodeHostname={nd.name} CPUs={CPUS_PER_NODE} "
          f"RealMemory=1000 State=UNKNOWN{f' Gres=gpu:{gpus}' if gpus else ''}" for nd in nodes),
        f"PartitionName={PARTITION} Nodes={','.join(nd.name for nd in nodes)} Default=YES MaxTime=INFINITE "
        "State=UP OverSubscribe=NO",
    ]
    return "\n".join(lines) + "\n"


def _state_dir(nodes: Sequence[lab.Node]) -> Path:
    base = nodes[0].ns[:-1]  # the lab's fb-<pid>-<start>-<hex>: its creator, for reap_stale
    return Path(tempfile.gettempdir()) / f"{STATE_PREFIX}{base}"


def _daemon(s: Slurm, node: lab.Node, name: str, argv: list[str]) -> None:
    """A daemon on `node`: in its network namespace, under its hostname, with its hosts file, and the host's
    /sys: `ip netns exec` mounts a /sys of the namespace's own, without the cgroup tree that slurmd (and
    each slurmstepd) needs even with linuxproc tracking and task/none ("No filesystem mounted on
    /sys/fs/cgroup"), so nsenter enters the network namespace alone and a mount namespace of the daemon's
    own binds the node's hosts file (what `ip netns exec` would bind)."""
    hosts = lab.NETNS_ETC / node.ns / "hosts"
    wrap = ["nsenter", f"--net=/run/netns/{node.ns}", "--", "unshare", "--mount", "--uts", "--", "sh", "-c",
            'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"', node.name, str(hosts), *argv]
    with open(s.state / f"{name}.out", "ab") as log:
        p = subprocess.Popen(wrap, start_new_session=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    node.procs.append(p)
    s.daemons[name] = p


@contextlib.contextmanager
def start(nodes: Sequence[lab.Node], *, gpus: int = 0) -> Iterator[Slurm]:
    """Slurm over the lab's nodes (lab.cluster's), ready: every node idle in the partition. On the way out,
    every process on the nodes ends and STATE goes (the namespaces go with lab.cluster)."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    reap_stale()
    nodes = list(nodes)
    state = _state_dir(nodes)
    try:
        _make_state(state, nodes, gpus)
        s = Slurm(nodes=nodes, state=state, conf=state / "slurm.conf")
        ctl = nodes[0]
        _daemon(s, ctl, "munged", [_which("munged"), "-F", "-f", f"--key-file={state}/munge/key",
                                       f"--socket={state}/munge/socket", f"--pid-file={state}/munge/pid",
                                       f"--seed-file={state}/munge/seed", f"--log-file={state}/munged.log"])
        _wait(lambda: (state / "munge" / "socket").exists(), 20, "munged's socket", s, "munged")
        _daemon(s, ctl, "slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(s.conf)])
        for nd in nodes:
            _daemon(s, nd, nd.name, [_which("slurmd"), "-D", "-f", str(s.conf), "-N", nd.name])
        _wait(lambda: _all_idle(s), READY_S, "every node idle", s, "slurmctld")
        yield s
    finally:
        stop(nodes)
        shutil.rmtree(state, ignore_errors=True)


def _make_state(state: Path, nodes: Sequence[lab.Node], gpus: int) -> None:
    state.mkdir(mode=0o755)
    for sub in ("munge", "ctld", *(nd.name for nd in nodes)):
        (state / sub).mkdir(mode=0o700 if sub == "munge" else 0o755)
    key = state / "munge" / "key"
    key.write_bytes(secrets.token_bytes(1024))  # munge's key of its own: no other cluster's credentials pass
    key.chmod(0o400)
    (state / "slurm.conf").write_text(_conf(state, nodes, gpus))
    if gpus:
        # GPUs Slurm can hand out (gres/gpu), files that play /dev/nvidiaN: the lab has none, but a job's
        # CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS and --gpus-per-task binding are Slurm's to set all the same
        dev = state / "dev"
        dev.mkdir()
        for i in range(gpus):
            os.mknod(dev / f"nvidia{i}", 0o600 | stat.S_IFCHR, os.makedev(195, 200 + i))
        (state / "gres.conf").write_text(f"Name=gpu File={dev}/nvidia[0-{gpus - 1}]\n")


def _all_idle(s: Slurm) -> bool:
    try:
        states = s.node_states()
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return len(states) == len(s.nodes) and all(v == "idle" for v in states.values())


def _wait(cond, timeout: float, what: str, s: Slurm, log: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        dead = [name for name, p in s.daemons.items() if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            log = dead[0] if dead else log
            text = s.log(log) + _read(s.state / f"{log}.out")
            tail = " | ".join(text.strip().splitlines()[-4:])
            why = f"{log} exited" if dead else f"not within {timeout:.0f} s"
            raise RuntimeError(f"the lab's Slurm did not start: {what}: {why}; {log}'s log: {tail}")
        time.sleep(0.3)


def stop(nodes: Sequence[lab.Node]) -> None:
    """End every process in the nodes' namespaces: the daemons, slurmstepd and whatever jobs left."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        for nd in nodes:
            for pid in lab.namespace_pids(nd.ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(lab.namespace_pids(nd.ns) for nd in nodes):
        time.sleep(0.1)


_STATE_RE = re.compile(rf"{STATE_PREFIX}{shaped.PREFIX}(\d+)-(\d+)-[0-9a-f]+")


def reap_stale() -> list[str]:
    """A SIGKILLed run's leftovers: its namespaces' processes and namespaces (lab.reap_stale), then its
    STATE folders (their creator is gone, or its pid was reused since)."""
    gone = lab.reap_stale()
    root = Path(tempfile.gettempdir())
    for d in root.glob(f"{STATE_PREFIX}*"):
        m = _STATE_RE.fullmatch(d.name)
        if m and shaped.start_time(int(m.group(1))) != int(m.group(2)):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(str(d))
    return gone


@contextlib.contextmanager
def cluster(n: int = 2, *, rate: str = "1gbit", gpus: int = 0) -> Iterator[Slurm]:
    """lab.cluster(n) with Slurm over it; all of it removed on the way out."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    with lab.cluster(n, rate=rate) as nodes, start(nodes, gpus=gpus) as s:
        yield s


def leftovers(s: Slurm) -> list[str]:
    """What of the lab's Slurm still exists (for tests): lab.leftovers, STATE, and any process still
    running a daemon's program with this cluster's files (found by its command line)."""
    out = lab.leftovers(s.nodes)
    if s.state.exists():
        out.append(str(s.state))
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if str(s.state).encode() in (d / "cmdline").read_bytes():
                    out.append(f"pid {d.name} ({_comm(int(d.name))})")
    return out
