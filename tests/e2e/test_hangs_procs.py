"""The process guards every command relies on: a run budget kills the whole group, a child dies with its
parent, a guarded child refuses to run when its starter is gone, and stale temp folders are removed.

    python3 -m pytest -q tests/e2e/test_hangs_procs.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fabricbench import jobs, procs
from proctree import alive, assert_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


def test_run_budget_kills_the_whole_group():
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)")
    with jobs.workspace("t") as ws:
        res = jobs.run([sys.executable, "-c", code], workspace=ws, budget_s=3, grace_s=1)
    assert res.timed_out and res.returncode is None  # the budget's verdict: the 60 s sleep was cut short
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

def test_wait_any_returns_when_a_process_ends_not_at_its_timeout():
    """The job runner's wait (procs.wait_any): a job's end is seen when it happens, not a poll interval
    later; with every process still running it waits its whole timeout. The upper bounds only stop a hung
    test: each is a tenth of the wait it tells apart (the 600 s timeout, the slow process's 600 s)."""
    fast = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        t0 = time.monotonic()
        procs.wait_any([fast, slow], 600.0)
        assert time.monotonic() - t0 < 60
        assert fast.wait(timeout=5) == 0
        t0 = time.monotonic()
        procs.wait_any([fast, slow], 0.5)
        assert 0.4 < time.monotonic() - t0 < 60
    finally:
        slow.kill()
        slow.wait()
