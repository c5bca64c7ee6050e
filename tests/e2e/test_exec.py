"""`fabricbench exec`: a user's command under a fabric, its exit status passed through, one record, secrets
masked, and nothing left behind after Ctrl-C, a SIGKILL of the job or a timeout.

    python3 -m pytest -q tests/e2e/test_exec.py              (SIGTERM, SIGHUP and the namespace cases: -m slow)

The job is a real program (tests write it): it starts a grandchild in a session of its own, as torchrun
starts its ranks, so that "nothing left" is checked where a process-group kill alone would miss one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from fabricbench.fabrics import shaped
from proctree import assert_gone, children, cmd_fixture, wait_for  # noqa: F401 - cmd_fixture: the `cmd` fixture

# A job that records the signals it gets, starts a grandchild (sleep) in a new session and writes the pids.
JOB = r'''
import os, signal, subprocess, sys, time
out = sys.argv[1]
ignore_term = "--ignore-term" in sys.argv
def said(sig, frame):
    with open(out + ".signals", "a") as fh:
        fh.write(signal.Signals(sig).name + "\n")
    if sig == signal.SIGINT or not ignore_term:
        sys.exit(0 if sig == signal.SIGINT else 143)
signal.signal(signal.SIGINT, said)
signal.signal(signal.SIGTERM, said)
signal.signal(signal.SIGHUP, said)
g = subprocess.Popen(["sleep", "300"], start_new_session=True)
with open(out + ".tmp", "w") as fh:
    fh.write(f"{os.getpid()} {g.pid} {os.environ.get('TMPDIR', '')}")
os.rename(out + ".tmp", out)
while True:
    time.sleep(0.1)
'''


def _netns_works() -> bool:
    return shaped.capability() is None


needs_netns = pytest.mark.skipif(not _netns_works(), reason="needs root, iproute2 (ip, tc) and network namespaces")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _start_job(cmd, tmp_path: Path, *args: str, fabric: str = "default", timeout: str | None = None,
               job_args: tuple[str, ...] = ()):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    pids = tmp_path / "pids"
    extra = ["--timeout", timeout] if timeout else []
    c = cmd(["exec", "--fabric", fabric, "--out", str(tmp_path / "r.jsonl"), *extra, *args, "--",
             sys.executable, str(script), str(pids), *job_args])
    wait_for(lambda: pids.exists() or c.p.poll() is not None, 60, "the job wrote its pids")
    assert pids.exists(), c.stderr
    job, grandchild, tmpdir = (pids.read_text().split(" ") + [""])[:3]
    return c, int(job), int(grandchild), tmpdir


def _netns_of(pid: int) -> list[str]:
    return [ns for ns in shaped.namespaces() if ns.startswith(f"{shaped.PREFIX}{pid}-")]


def test_exit_status_is_passed_through(cmd, tmp_path):
    for code in (3,):
        c = cmd(["exec", "--", sys.executable, "-c", f"import sys; sys.exit({code})"])
        rc, _ = c.wait(60)
        assert rc == code, c.stderr
    c = cmd(["exec", "--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    rc, _ = c.wait(60)
    assert rc == 128 + 9, c.stderr  # a death by signal N reads as a shell says it: 128 + N


def test_record_contents_and_secrets_masked(cmd, tmp_path):
    """The record: fabric, the command (secret values masked), wall time, exit status, the transport NCCL's
    own log shows (the job writes it where NCCL would, NCCL_DEBUG_FILE) and the host's load."""
    job = ("import os, sys; f = os.environ['NCCL_DEBUG_FILE'].replace('%h', 'h').replace('%p', str(os.getpid()));"
           "open(f, 'w').write('h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\\n'"
           "'h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\\n');"
           "print(os.environ['NCCL_P2P_DISABLE'], os.environ['MY_TOKEN'], os.environ.get('NCCL_NVLS_ENABLE'));"
           "sys.exit(7)")
    c = cmd(["exec", "--fabric", "sec:NCCL_P2P_DISABLE=1,MY_TOKEN=hunter2", "--out", str(tmp_path / "r.jsonl"),
             "--", sys.executable, "-c", job, "API_KEY=s3cr3tval"])
    rc, _ = c.wait(60)
    assert rc == 7, c.stderr
    assert (tmp_path / "stdout.txt").read_text().split() == ["1", "hunter2", "None"]  # applied; NVLS untouched
    [rec] = _records(tmp_path / "r.jsonl")
    text = (tmp_path / "r.jsonl").read_text() + c.stderr
    assert "hunter2" not in text and "s3cr3tval" not in text
    assert rec["kind"] == "exec" and rec["fabric"] == "sec" and rec["status"] == "error"
    assert rec["exit_status"] == 7 and rec["message"] == "the command exited with status 7"
    assert rec["command"][-1] == "API_KEY=***" and rec["command"][0] == sys.executable
    assert rec["fabric_env"] == {"NCCL_P2P_DISABLE": "1", "MY_TOKEN": "***"}
    assert rec["transport"] == "P2P/CUMEM" and rec["nccl_version"] == "2.21.5"
    assert "expected SHM, but NCCL used P2P/CUMEM" in rec["transport_mismatch"]
    assert "NCCL used P2P/CUMEM" in c.stderr  # said, not only written
    assert 0 < rec["wall_s"] < 60 and rec["host_load"]["readings"] >= 1
    from fabricbench.results.records import read

    assert len(read(tmp_path / "r.jsonl", kind="exec").records) == 1  # the shared reader takes it


@pytest.mark.slow
def test_a_job_without_nccl_says_so(cmd, tmp_path):
    c = cmd(["exec", "--out", str(tmp_path / "r.jsonl"), "--", sys.executable, "-c", "pass"])
    assert c.wait(60)[0] == 0
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["status"] == "ok" and rec["transport"] == "none (no NCCL communicator)"
    assert rec["transport_mismatch"] is None and rec["exit_status"] == 0


@pytest.mark.slow
def test_a_users_nccl_debug_is_left_alone_and_said(cmd, tmp_path):
    c = cmd(["exec", "--out", str(tmp_path / "r.jsonl"), "--", sys.executable, "-c",
             "import os; print(os.environ['NCCL_DEBUG'], os.environ.get('NCCL_DEBUG_FILE'))"], env={"NCCL_DEBUG": "WARN"})
    assert c.wait(60)[0] == 0
    assert (tmp_path / "stdout.txt").read_text().split() == ["WARN", "None"]
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["transport"].startswith("unknown (NCCL_DEBUG is yours")


def test_never_overrides_a_variable_the_user_set(cmd, tmp_path):
    c = cmd(["exec", "--fabric", "p2p-off", "--out", str(tmp_path / "r.jsonl"), "--", sys.executable, "-c", "pass"],
            env={"NCCL_P2P_DISABLE": "0"})
    rc, _ = c.wait(60)
    assert rc == 2 and c.stderr.count("\n") == 1 and "NCCL_P2P_DISABLE=0" in c.stderr
    assert not (tmp_path / "r.jsonl").exists() or not _records(tmp_path / "r.jsonl")  # nothing ran


def test_sigint_reaches_the_job_and_leaves_nothing(cmd, tmp_path):
    c, job, grandchild, tmpdir = _start_job(cmd, tmp_path)
    os.kill(c.p.pid, signal.SIGINT)
    rc, _ = c.wait(60)
    assert rc == 130, c.stderr
    assert (tmp_path / "pids.signals").read_text().split() == ["SIGINT"]  # the job heard Ctrl-C itself
    assert_gone([job, grandchild])
    assert not children(c.p.pid) and not Path(tmpdir).exists()
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["status"] == "interrupted" and rec["exit_status"] == 0 and "Ctrl-C" in rec["message"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_reach_the_job(cmd, tmp_path, sig):
    c, job, grandchild, _ = _start_job(cmd, tmp_path)
    os.kill(c.p.pid, sig)
    assert c.wait(60)[0] == 128 + sig, c.stderr
    assert (tmp_path / "pids.signals").read_text().split() == [sig.name]
    assert_gone([job, grandchild])
    assert "the command was sent" in c.stderr and "appended to" in c.stderr


def test_sigkill_of_the_job_leaves_nothing(cmd, tmp_path):
    c, job, grandchild, tmpdir = _start_job(cmd, tmp_path)
    os.kill(job, signal.SIGKILL)
    rc, _ = c.wait(60)
    assert rc == 128 + 9, c.stderr
    assert_gone([job, grandchild])  # the grandchild in its own session too
    assert not Path(tmpdir).exists()
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["status"] == "error" and rec["exit_status"] == -9 and "SIGKILL" in rec["message"]


def test_timeout_ends_the_job_and_leaves_nothing(cmd, tmp_path):
    c, job, grandchild, _ = _start_job(cmd, tmp_path, timeout="1")
    rc, took = c.wait(60)
    assert rc == 124, c.stderr
    assert (tmp_path / "pids.signals").read_text().split() == ["SIGTERM"]
    assert_gone([job, grandchild])
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["status"] == "timeout" and rec["timeout_s"] == 1 and "within 1 s" in rec["message"]


@pytest.mark.slow
def test_timeout_kills_a_job_that_ignores_sigterm(cmd, tmp_path):
    c, job, grandchild, _ = _start_job(cmd, tmp_path, timeout="1", job_args=("--ignore-term",))
    t0 = time.monotonic()
    rc, _ = c.wait(60)
    assert rc == 124 and time.monotonic() - t0 < 1 + 5 + 10, c.stderr  # --timeout, the grace, slack
    assert_gone([job, grandchild])


@pytest.mark.slow
@needs_netns
@pytest.mark.parametrize("how", ["sigint", "sigkill-job", "timeout"])
def test_shaped_leaves_no_namespace(cmd, tmp_path, how):
    c, job, grandchild, _ = _start_job(cmd, tmp_path, fabric="shaped:100mbit",
                                       timeout="3" if how == "timeout" else None)
    with shaped.reaping_lock():  # no other start reaps this run's namespace before we look
        assert _netns_of(c.p.pid), "the job did not run in a namespace of its own"
    if how == "sigint":
        os.kill(c.p.pid, signal.SIGINT)
    elif how == "sigkill-job":
        os.kill(job, signal.SIGKILL)
    rc, _ = c.wait(60)
    assert rc == {"sigint": 130, "sigkill-job": 137, "timeout": 124}[how], c.stderr
    assert_gone([job, grandchild])
    assert not _netns_of(c.p.pid)
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["fabric"] == "shaped:100mbit" and rec["shaped_rate_bps"] == 100_000_000 and rec["netns"]
