"""No command hangs: a stopped, missing or killed rank, and a killed parent, each end within their bound,
with the records kept and no process or temporary folder left behind (checked by pid, never by name).

    python3 -m pytest -q tests/e2e/test_hangs.py

The sweeps run 2 gloo ranks (one job of the child runner, fabricbench/jobs) with a small --timeout; bounds
are --timeout + liveness.DEAD_AFTER_S + a margin for a loaded 2-core CI machine. Processes are found through /proc/<pid>/task/*/children.
The process guards (procs, jobs.run) are tested in test_hangs_procs.py, every orchestrating command killed
in test_hangs_leftovers.py; the process helpers and the `cmd` fixture live in proctree.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from fabricbench import procs
from fabricbench.jobs.liveness import DEAD_AFTER_S
from proctree import assert_gone, children, cmd_fixture, wait_for  # noqa: F401 - cmd_fixture: the `cmd` fixture

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")

TIMEOUT = 6  # --timeout of the sweeps below
MARGIN = 6  # start-up of the watchdog's reaction, killing, reaping and exiting on a loaded CI box
LONG_SWEEP = ["--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce",
              "--sizes", "1K-64K:x2", "--iters", "3000", "--warmup", "1", "--quiet"]


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
    # --timeout 3 ends the rendezvous, never torch's default 30 minutes: the wait's 60 s (which raises) tells
    # the two apart on any host, and the line names the rendezvous; how soon is no bar here (a busy host)
    rc, took = c.wait(60)
    print(f"ended {took:.1f} s after the fault")
    assert rc == 1, c.stderr
    (line,) = error_lines(c.stderr)
    assert "not every rank joined" in line and "WORLD_SIZE=2" in line and "Traceback" not in c.stderr


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
        try:  # every rank: what a record keeps is the steps every rank finished (one rank may lag a step)
            return dirs and all(len(json.loads((dirs[0] / f"rank-{r}.json").read_text()).get("step_times_s") or [])
                                >= 2 for r in (0, 1))
        except (OSError, ValueError, AttributeError):
            return False

    wait_for(running, 180, "both ranks past two steps")
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
    """A SIGSTOPped rank with --timeout 20 ends the run within 35 s, exit 1, naming that rank
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
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_train_killed_parent_leaves_no_process_or_folder(cmd, tmp_path, sig):
    out = tmp_path / "t.jsonl"
    c, launcher, workers, tmp = start_train(cmd, out)
    os.kill(c.p.pid, sig)
    rc, took = c.wait(30)
    print(f"ended {took:.1f} s after the fault")
    assert rc == {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130, signal.SIGTERM: 143,
                  signal.SIGHUP: 129}[sig], c.stderr
    if sig != signal.SIGKILL:  # the running run's finished steps are kept, and the line says where
        word = {signal.SIGINT: "Interrupted", signal.SIGTERM: "Terminated", signal.SIGHUP: "Hung up"}[sig]
        (said,) = [ln for ln in c.stderr.splitlines() if ln.startswith(word)]
        assert "ddp's run stopped after" in said and str(out) in said, said
        (rec,) = [json.loads(ln) for ln in out.read_text().splitlines()]
        assert rec["status"] == "interrupted" and rec["steps_completed"] >= 2
        assert len(rec["step_times_s"]) == rec["steps_completed"]
    # SIGINT/SIGTERM: each rank's group gets SIGTERM, then SIGKILL after procs.GRACE_S
    assert_gone([*launcher, *workers], within=procs.GRACE_S + 5)
    if sig == signal.SIGKILL:
        assert tmp.exists()  # nothing could run in the parent; the next start removes it
        assert str(tmp) in procs.clean_stale()
    assert not tmp.exists()
