"""The stall watchdog (fabricbench/jobs/heartbeat.py). A SIGSTOPped rank of train (DDP, FSDP,
ZeRO-3) ends the run within --stall-timeout + 15 s, exit 1, naming the rank and its host, with the steps
every rank finished kept and no process or temporary folder left.

    python3 -m pytest -q -m slow tests/e2e/test_stall_watchdog.py

Each run: 2 gloo ranks of tiny-mistral on CPU; the whole-run --timeout is far away (240 s), so only the
watchdog can end the run in time.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from roots import TESTS

sys.path.insert(0, str(TESTS))
from proctree import assert_gone, children, cmd_fixture, wait_for  # noqa: E402,F401 - cmd_fixture: the `cmd` fixture
from test_hangs import TRAIN, error_lines, train_ranks  # noqa: E402

from fabricbench import procs  # noqa: E402

HAS_DEEPSPEED = __import__("importlib").util.find_spec("deepspeed") is not None
SLACK = 15  # the rank is named within stall + 15 s


def quiet_for(message: str) -> int:
    """The seconds the watchdog says a rank was silent: what it saw, the bound or a little over (it looks every
    heartbeat.BEAT_S, and rounds), so a 6 s bound reads "made no progress for 7 s" as often as "for 6 s"."""
    m = re.search(r"made no progress for (\d+) s", message)
    assert m, message
    return int(m.group(1))


def start(cmd, out: Path, strategy: str, stall: int):
    args = [*TRAIN[:2], strategy, *TRAIN[3:], "--timeout", "240", "--stall-timeout", str(stall), "--out", str(out)]
    c = cmd(args)

    def stepping():
        if c.p.poll() is not None:
            return True
        dirs = list(Path(tempfile.gettempdir()).glob(f"{procs.TEMP_PREFIX}{c.p.pid}-train-*"))
        try:
            return dirs and len(json.loads((dirs[0] / "rank-1.json").read_text()).get("step_times_s") or []) >= 2
        except (OSError, ValueError):
            return False

    wait_for(stepping, 240, "rank 1 past two steps")
    assert c.p.poll() is None, c.stderr
    launcher, workers = train_ranks(c.p.pid)
    tmp = next(Path(tempfile.gettempdir()).glob(f"{procs.TEMP_PREFIX}{c.p.pid}-train-*"))
    return c, launcher, workers, tmp


@pytest.mark.slow
@pytest.mark.parametrize("strategy, stall", [  # 30 s: the bound asked for; 6 s: the bound is the watchdog's own
    ("ddp", 30), ("fsdp", 30), ("ddp", 6),
    pytest.param("zero3", 30, marks=pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed"))])
def test_stopped_train_rank_is_named_within_the_stall_bound(cmd, tmp_path, strategy, stall):
    out = tmp_path / "t.jsonl"
    c, launcher, workers, tmp = start(cmd, out, strategy, stall)
    os.kill(workers[1], signal.SIGSTOP)
    try:
        rc, took = c.wait(stall + 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(workers[1], signal.SIGCONT)
    print(f"{strategy}: ended {took:.1f} s after the fault (stall {stall} s)")
    assert rc == 1 and took < stall + SLACK, (took, c.stderr)
    (line,) = error_lines(c.stderr)
    assert f"{strategy}: rank 1 (host " in line and stall <= quiet_for(line) < stall + SLACK, line
    (rec,) = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert rec["status"] == "error" and rec["rank_died"] == 1 and rec["ranks_died"] == [1]
    assert rec["steps_completed"] >= 2 and len(rec["step_times_s"]) == rec["steps_completed"]
    assert rec["hosts"] and len(rec["hosts"]) == 2
    assert_gone([*launcher, *workers])
    assert not tmp.exists()


@pytest.mark.slow
def test_stopped_sweep_rank_is_named_within_the_stall_bound(cmd, tmp_path):
    from test_hangs import LONG_SWEEP, records

    stall = 30
    out = tmp_path / "s.jsonl"
    c = cmd(["sweep", *LONG_SWEEP, "--timeout", "300", "--stall-timeout", str(stall), "--out", str(out)])
    wait_for(lambda: records(out) or c.p.poll() is not None, 120, "a first record")
    assert c.p.poll() is None, c.stderr
    ranks = wait_for(lambda: len(children(c.p.pid)) == 2 and children(c.p.pid), 10, "two ranks")
    kept = len(records(out))
    os.kill(ranks[1], signal.SIGSTOP)
    try:
        rc, took = c.wait(stall + 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(ranks[1], signal.SIGCONT)
    print(f"sweep: ended {took:.1f} s after the fault (stall {stall} s)")
    assert rc != 0 and took < stall + SLACK, (took, c.stderr)
    (line,) = error_lines(c.stderr)
    assert "rank 1 stopped answering" in line, line
    assert len(records(out)) >= kept >= 1
    assert_gone(ranks)


def _descendants(pid: int) -> set[int]:
    seen, todo = set(), [pid]
    while todo:
        for k in children(todo.pop()):
            if k not in seen:
                seen.add(k)
                todo.append(k)
    return seen


@pytest.mark.slow
def test_stopped_rank_of_a_study_unit_is_named_within_the_stall_bound(cmd, tmp_path):
    """A study's train unit whose rank stops ends within the bound, naming the rank; the study goes on, writes
    its report, exits 1 (a unit failed) and leaves nothing behind."""
    stall = 30
    out = tmp_path / "study"
    c = cmd(["study", "--device", "cpu", "--nprocs", "2", "--strategies", "ddp", "--fabrics", "default",
             "--model", "tiny-mistral", "--steps", "2000", "--warmup-steps", "2", "--batch-size", "2",
             "--seq-len", "16", "--repeats", "1", "--target-ci", "0", "--sizes", "1K,4K", "--iters", "2",
             "--train-timeout", "600", "--stall-timeout", str(stall), "--quiet", "--out", str(out)])

    def training():  # (the train unit's pid, its temp folder) once its rank 1 is past two steps
        if c.p.poll() is not None:
            return True
        mine = _descendants(c.p.pid)
        # a study's unit runs in its job's private folder, which is also its TMPDIR (jobs/runner.py)
        # glob.glob, not Path.glob: another test's folder under the temp dir may go between the listing and
        # the look inside it, and Path.glob raised FileNotFoundError for one (glob.glob skips what went)
        top = tempfile.gettempdir()
        for d in map(Path, [*glob.glob(os.path.join(top, f"{procs.TEMP_PREFIX}*-train-*")),
                            *glob.glob(os.path.join(top, "*", f"{procs.TEMP_PREFIX}*-train-*"))]):
            pid = int(d.name[len(procs.TEMP_PREFIX):].split("-")[0])
            try:
                steps = json.loads((d / "rank-1.json").read_text()).get("step_times_s") or []
            except (OSError, ValueError):
                continue
            if pid in mine and len(steps) >= 2:
                return pid, d
        return False

    found = wait_for(training, 300, "the study's train unit past two steps")
    assert c.p.poll() is None, c.stderr
    unit_pid, tmp = found
    launcher, workers = train_ranks(unit_pid)
    import time

    t0 = time.monotonic()
    os.kill(workers[1], signal.SIGSTOP)
    try:
        wait_for(lambda: not Path(f"/proc/{unit_pid}").exists(), stall + 60, "the train unit to end")
        took = time.monotonic() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(workers[1], signal.SIGCONT)
    print(f"study unit: ended {took:.1f} s after the fault (stall {stall} s)")
    assert took < stall + SLACK, took
    rc, _ = c.wait(300)
    assert rc == 1, c.stderr
    assert "unit(s) failed: train ddp @ default" in c.stderr, c.stderr
    recs = [json.loads(ln) for ln in (out / "units" / "train_ddp_default.jsonl").read_text().splitlines()]
    train = [r for r in recs if r.get("kind") == "train"]
    assert train and train[-1]["status"] == "error" and train[-1]["rank_died"] == 1, train
    assert "rank 1 (host " in train[-1]["message"] and stall <= quiet_for(train[-1]["message"]) < stall + SLACK
    assert train[-1]["steps_completed"] >= 2
    assert (out / "report.md").exists()
    assert_gone([unit_pid, *launcher, *workers])
    assert not tmp.exists()
