"""No command hangs: a stopped, missing or killed rank, and a killed parent, each end within their bound,
with the records kept and no process or temporary folder left behind (checked by pid, never by name).

    python3 -m pytest -q tests/test_hangs.py

The sweeps run 2 gloo ranks (one job of the child runner, fabricbench/jobs) with a small --timeout; bounds
are --timeout + launch.DEAD_AFTER_S + a margin for a loaded 2-core CI machine. Processes are found through /proc/<pid>/task/*/children.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fabricbench import jobs, procs
from fabricbench.measuring.launch import DEAD_AFTER_S

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")

TIMEOUT = 6  # --timeout of the sweeps below
MARGIN = 6  # start-up of the watchdog's reaction, killing, reaping and exiting on a loaded CI box
LONG_SWEEP = ["--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce",
              "--sizes", "1K-64K:x2", "--iters", "3000", "--warmup", "1", "--quiet"]


# -- helpers ------------------------------------------------------------------------------------------------
def children(pid: int) -> list[int]:
    kids = []
    for t in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids += [int(k) for k in t.read_text().split()]
        except OSError:
            pass
    return kids


def train_ranks(pid: int, n: int = 2) -> tuple[list[int], list[int]]:
    """A train command's (launchers, ranks in rank order): on one node the job layer starts the ranks itself
    (training/launch.py rank_commands: `... worker SPEC --rank R`), so there is no launcher between; under
    torchrun the ranks are its children."""
    def cmdline(p: int) -> list[str]:
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return []

    def found():
        top = children(pid)
        ranks = [p for p in top if "fabricbench.training.worker" in cmdline(p)]
        launchers = [p for p in top if p not in ranks]
        ranks += sum((children(t) for t in launchers), [])
        if len(ranks) != n:
            return False
        by = {p: cmdline(p) for p in ranks}
        key = {p: int(a[a.index("--rank") + 1]) if "--rank" in a else i for i, (p, a) in enumerate(by.items())}
        return launchers, sorted(ranks, key=key.get)
    return wait_for(found, 10, f"{n} training ranks")


def alive(pid: int) -> bool:
    """Running, sleeping or stopped; a zombie (dead, not yet reaped by init) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def assert_gone(pids, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    assert not left, f"processes left: {left}"


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("kind") == "collective":
            out.append(rec)
    return out


class Cmd:
    """`python -m fabricbench ARGS` in a session of its own (the test can always clean up), output in files."""

    def __init__(self, tmp: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.err_path = tmp / "stderr.txt"
        self.out_fh, self.err_fh = open(tmp / "stdout.txt", "w"), open(self.err_path, "w")
        e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        e.update(env or {})
        self.p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], stdout=self.out_fh,
                                  stderr=self.err_fh, env=e, start_new_session=True)

    def wait(self, timeout: float) -> tuple[int, float]:
        t0 = time.monotonic()
        rc = self.p.wait(timeout=timeout)
        return rc, time.monotonic() - t0

    @property
    def stderr(self) -> str:
        self.err_fh.flush()
        return self.err_path.read_text()

    def close(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        self.out_fh.close()
        self.err_fh.close()


@pytest.fixture
def cmd(tmp_path):
    started = []

    def start(args, env=None):
        c = Cmd(tmp_path, args, env)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()


def error_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("Error:")]


def start_long_sweep(cmd, out: Path):
    c = cmd([*("sweep", *LONG_SWEEP), "--timeout", str(TIMEOUT), "--out", str(out)])
    wait_for(lambda: records(out) or c.p.poll() is not None, 120, "a first record")
    assert c.p.poll() is None, c.stderr
    ranks = wait_for(lambda: len(children(c.p.pid)) == 2 and children(c.p.pid), 10, "two ranks")
    return c, ranks


# -- sweep --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stopped_rank_ends_the_run_within_the_timeout(cmd, tmp_path):
    out = tmp_path / "r.jsonl"
    c, ranks = start_long_sweep(cmd, out)
    before = len(records(out))
    os.kill(ranks[1], signal.SIGSTOP)
    rc, took = c.wait(TIMEOUT + DEAD_AFTER_S + MARGIN + 10)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1, c.stderr
    assert took <= TIMEOUT + DEAD_AFTER_S + MARGIN, took
    (line,) = error_lines(c.stderr)
    assert "rank 1 stopped answering" in line and "Traceback" not in c.stderr
    assert len(records(out)) >= before and all(r["status"] in ("ok", "timeout") for r in records(out))
    assert_gone(ranks)  # SIGKILL reaches a stopped process


@pytest.mark.slow
def test_every_rank_stopped_ends_at_timeout_plus_a_few_seconds(cmd, tmp_path):
    out = tmp_path / "r.jsonl"
    c, ranks = start_long_sweep(cmd, out)
    before = len(records(out))
    for r in ranks:
        os.kill(r, signal.SIGSTOP)
    rc, took = c.wait(TIMEOUT + DEAD_AFTER_S + MARGIN + 10)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1 and "stopped answering" in c.stderr, c.stderr
    assert TIMEOUT <= took <= TIMEOUT + DEAD_AFTER_S + MARGIN, took
    assert len(records(out)) == before
    assert_gone(ranks)


@pytest.mark.slow
def test_killed_rank_ends_the_run_at_once(cmd, tmp_path):
    out = tmp_path / "r.jsonl"
    c, ranks = start_long_sweep(cmd, out)
    os.kill(ranks[1], signal.SIGKILL)
    rc, took = c.wait(30)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1 and took < MARGIN, (took, c.stderr)
    (line,) = error_lines(c.stderr)
    assert "rank 1 died (killed by SIGKILL)" in line
    assert records(out) and records(out)[0]["status"] == "ok"
    assert_gone(ranks)


def test_missing_rank_ends_the_rendezvous_at_the_timeout(cmd, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    c = cmd(["sweep", "--engine", "torch", "--backend", "gloo", "--ops", "all_reduce", "--sizes", "1K",
             "--timeout", "3"], env)
    rc, took = c.wait(60)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1, c.stderr
    (line,) = error_lines(c.stderr)
    assert "not every rank joined" in line and "WORLD_SIZE=2" in line and "Traceback" not in c.stderr
    # python + torch start-up, then --timeout 3: never torch's default 30 minutes
    assert took < 3 + 40


def test_torchrun_variables_without_a_master_are_a_usage_error(cmd):
    c = cmd(["sweep", "--engine", "torch", "--backend", "gloo", "--sizes", "1K", "--timeout", "3"],
            {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "", "MASTER_PORT": ""})
    rc, _ = c.wait(60)
    assert rc == 2 and len(error_lines(c.stderr)) == 1 and "MASTER_ADDR" in c.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_parent_leaves_no_rank(cmd, tmp_path, sig):
    out = tmp_path / "r.jsonl"
    c, ranks = start_long_sweep(cmd, out)
    kept = len(records(out))
    os.kill(c.p.pid, sig)  # the parent alone, not its group
    rc, took = c.wait(30)
    print(f"ended {took:.1f} s after the fault")
    assert took < MARGIN
    assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 130), c.stderr
    assert_gone(ranks)  # SIGKILL: by the death signal; SIGINT: killed and reaped by the parent
    assert len(records(out)) >= kept >= 1


# -- train --------------------------------------------------------------------------------------------------
TRAIN = ["train", "--strategy", "ddp", "--model", "tiny-mistral", "--device", "cpu", "--nprocs", "2",
         "--steps", "2000", "--warmup-steps", "2", "--batch-size", "2", "--seq-len", "16", "--trace-steps", "0"]


def start_train(cmd, out: Path, timeout: int = 240):
    c = cmd([*TRAIN, "--timeout", str(timeout), "--out", str(out)])

    def running():
        if c.p.poll() is not None:
            return True
        dirs = list(Path(tempfile.gettempdir()).glob(f"{procs.TEMP_PREFIX}{c.p.pid}-train-*"))
        rank1 = dirs[0] / "rank-1.json" if dirs else None
        try:
            return dirs and len(json.loads(rank1.read_text()).get("step_times_s") or []) >= 2
        except (OSError, ValueError, AttributeError):
            return False

    wait_for(running, 180, "rank 1 past two steps")
    assert c.p.poll() is None, c.stderr
    launcher, workers = train_ranks(c.p.pid)  # one node: no torchrun between the command and its ranks
    tmp = next(Path(tempfile.gettempdir()).glob(f"{procs.TEMP_PREFIX}{c.p.pid}-train-*"))
    return c, launcher, workers, tmp


@pytest.mark.slow
def test_train_rank_killed_is_an_error_with_the_steps_kept(cmd, tmp_path):
    out = tmp_path / "t.jsonl"
    c, launcher, workers, tmp = start_train(cmd, out)
    os.kill(workers[1], signal.SIGKILL)
    rc, took = c.wait(60)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1 and took < 30, (took, c.stderr)
    (line,) = error_lines(c.stderr)
    assert "ddp: rank 1 died after" in line and "SIGKILL" in line
    (rec,) = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert rec["status"] == "error" and rec["rank_died"] == 1 and rec["steps_completed"] >= 2
    assert len(rec["step_times_s"]) == rec["steps_completed"] and all(t > 0 for t in rec["step_times_s"])
    assert_gone([*launcher, *workers])
    assert not tmp.exists()


@pytest.mark.slow
def test_train_rank_stopped_is_named_within_the_timeout(cmd, tmp_path):
    """Issue 18: a SIGSTOPped rank with --timeout 20 ends the run within 35 s, exit 1, naming that rank
    (not rank 0, which only waits for it), with the steps every rank finished kept."""
    out = tmp_path / "t.jsonl"
    c, launcher, workers, tmp = start_train(cmd, out, timeout=20)
    os.kill(workers[1], signal.SIGSTOP)
    try:
        rc, took = c.wait(60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(workers[1], signal.SIGCONT)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1 and took < 35, (took, c.stderr)
    (line,) = error_lines(c.stderr)
    assert "ddp: rank 1 stopped answering" in line and "every rank was killed" in line, line
    (rec,) = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert rec["status"] == "error" and rec["rank_died"] == 1 and rec["steps_completed"] >= 2
    assert_gone([*launcher, *workers])
    assert not tmp.exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_train_killed_parent_leaves_no_process_or_folder(cmd, tmp_path, sig):
    c, launcher, workers, tmp = start_train(cmd, tmp_path / "t.jsonl")
    os.kill(c.p.pid, sig)
    rc, took = c.wait(30)
    print(f"ended {took:.1f} s after the fault")
    assert rc == {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130, signal.SIGTERM: 143}[sig], c.stderr
    if sig != signal.SIGKILL:
        (said,) = [ln for ln in c.stderr.splitlines() if "results measured so far were written" in ln]
        assert said.startswith("Terminated" if sig == signal.SIGTERM else "Interrupted")
    # SIGINT/SIGTERM: each rank's group gets SIGTERM, then SIGKILL after procs.GRACE_S
    assert_gone([*launcher, *workers], within=procs.GRACE_S + 5)
    if sig == signal.SIGKILL:
        assert tmp.exists()  # nothing could run in the parent; the next start removes it
        assert str(tmp) in procs.clean_stale()
    assert not tmp.exists()


# -- procs --------------------------------------------------------------------------------------------------
def test_run_budget_kills_the_whole_group():
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)")
    t0 = time.monotonic()
    with jobs.workspace("t") as ws:
        res = jobs.run([sys.executable, "-c", code], workspace=ws, budget_s=3, grace_s=1)
    assert res.timed_out and res.returncode is None and time.monotonic() - t0 < 15
    assert_gone([int(res.stdout.split()[0])])  # the grandchild went with the group


def test_spawned_child_dies_with_its_parent():
    """SIGKILL a middle process: its procs.spawn'd child gets the death signal."""
    code = ("import sys, time; from fabricbench import procs; "
            "p = procs.spawn([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(p.pid, flush=True); time.sleep(60)")
    mid = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(mid.stdout.readline())
        assert alive(child)
        mid.kill()
        mid.wait()
        assert_gone([child])
    finally:
        if mid.poll() is None:
            mid.kill()


def test_guard_refuses_to_run_when_the_starter_is_gone():
    env = {**os.environ, procs.PARENT_ENV: str(2**22 + 12345)}  # no such ancestor
    res = subprocess.run([sys.executable, "-m", "fabricbench.procs", "json.tool", "--help"], env=env,
                         capture_output=True, timeout=60)
    assert res.returncode == -signal.SIGKILL
    with jobs.workspace("t") as ws:
        ok = jobs.run([sys.executable, "-m", "fabricbench.procs", "json.tool", "--help"], workspace=ws, budget_s=60)
    assert ok.returncode == 0 and "json.tool" in ok.stdout


def test_stale_temp_folders_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{procs.TEMP_PREFIX}{dead.pid}-train-ddp-x"
    live = tmp_path / f"{procs.TEMP_PREFIX}{os.getppid()}-train-ddp-y"
    other = tmp_path / "fabricbench-train-ddp-z"  # not ours to judge: no pid in the name
    for d in (stale, live, other):
        d.mkdir()
        (d / "rank-0.json").write_text("{}")
    assert procs.clean_stale(tmp_path) == [str(stale)]
    assert not stale.exists() and live.exists() and other.exists()
    with procs.temp_dir("a/b c") as d:
        assert d.name.startswith(f"{procs.TEMP_PREFIX}{os.getpid()}-a_b_c-") and d.is_dir()
    assert not d.exists()


# -- no leftovers: every orchestrating command, killed by SIGINT, SIGTERM or SIGKILL -------------------------
QUALIFY_SPEC = Path(__file__).parent / "data" / "qualify" / "gloo_e2e.toml"
LONG_GLOO = ["--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce", "--sizes",
             "1K-64K:x2", "--iters", "3000", "--warmup", "1", "--timeout", "30"]
ORCHESTRATORS = {
    # name: (argv, how deep the process tree must be before the signal: a measuring process is running;
    # `ip netns exec` execs the child, fabricbench.procs runs a training rank in the same process)
    "sweep --fabric": (["sweep", *LONG_GLOO, "--fabric", "lo:GLOO_SOCKET_IFNAME=lo", "--quiet"], 2),
    "compare": (["compare", "--fabrics", "shaped:1gbit,default", *LONG_GLOO], 2),
    "qualify": (["qualify", "--spec", str(QUALIFY_SPEC), "--quiet"], 2),
    "study": (["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral", "--strategies", "ddp",
               "--fabrics", "default,shaped:1gbit", "--steps", "2000", "--warmup-steps", "1", "--batch-size", "2",
               "--seq-len", "16", "--quiet"], 3),
}


def descendants(pid: int) -> list[list[int]]:
    """The process tree under pid, level by level (children, grandchildren...)."""
    levels, level = [], children(pid)
    while level:
        levels.append(level)
        level = sum((children(p) for p in level), [])
    return levels


def our_netns(pid: int) -> list[str]:
    """Network namespaces the process made (shaped fabrics name them fb-<pid>-...)."""
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [ln.split()[0] for ln in res.stdout.splitlines() if ln.startswith(f"fb-{pid}-")]


def left_in(tmp_root: Path) -> list[Path]:
    return [p for p in tmp_root.iterdir() if p.name.startswith((procs.TEMP_PREFIX, "torchelastic_"))]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["INT", "TERM", "KILL"])
@pytest.mark.parametrize("name", list(ORCHESTRATORS))
def test_killed_orchestrator_leaves_nothing(cmd, tmp_path, name, sig):
    """Issue 18: no process, temp folder (fabricbench's, torchrun's) or network namespace outlives the
    command. SIGINT exits 130 and SIGTERM 143 with one line; after SIGKILL nothing could run in the
    command, so its children die by the death signal and the next start removes its folders and namespaces."""
    from fabricbench.fabrics import shaped

    argv, depth = ORCHESTRATORS[name]
    tmp_root = tmp_path / "tmp"  # the command's TMPDIR: what it leaves there is ours to see
    tmp_root.mkdir()
    c = cmd([*argv, "--out", str(tmp_path / ("out" if name in ("qualify", "study") else "out.jsonl"))],
            {"TMPDIR": str(tmp_root)})
    tree = wait_for(lambda: (c.p.poll() is not None and [[-1]]) or
                    (len(descendants(c.p.pid)) >= depth and descendants(c.p.pid)), 240, "a measuring process")
    assert c.p.poll() is None, c.stderr
    time.sleep(1.0)  # let the measurement get going (and a namespace be made)
    pids = sum(descendants(c.p.pid), [])
    assert left_in(tmp_root) and len(tree) >= depth  # there was something to clean up
    os.kill(c.p.pid, sig)
    rc, took = c.wait(60)
    print(f"{name}: ended {took:.1f} s after {sig.name}")
    assert rc == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -9}[sig], c.stderr
    if sig != signal.SIGKILL:
        said = [ln for ln in c.stderr.splitlines() if ln.startswith(("Interrupted", "Terminated"))]
        assert len(said) == 1 and "Traceback" not in c.stderr, c.stderr
    assert_gone(pids, within=procs.GRACE_S + 10)
    if sig == signal.SIGKILL:  # the next fabricbench start removes what a SIGKILL left
        procs.clean_stale(tmp_root)
        if os.geteuid() == 0:
            shaped.remove_stale()
    assert not left_in(tmp_root), left_in(tmp_root)
    assert not our_netns(c.p.pid)
