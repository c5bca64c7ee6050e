"""fabricbench/cluster/nodewatch.py against a stand-in sinfo (a script on PATH answering as Slurm 22.05's
`sinfo -h -N -n NODES -o %N|%T|%E` does); the real Slurm's drain is tests/e2e/test_slurm_faults.py's.

    python3 -m pytest -q -n0 tests/unit/test_nodewatch.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from fabricbench.cluster import nodewatch

SINFO = """#!/bin/sh
echo "$*" >> "{calls}"
cat "{answer}"
"""


def step_env(tmp: Path, **more: str) -> dict[str, str]:
    """Task 0 of an srun step of two nodes, with the stand-in sinfo first on PATH."""
    (tmp / "bin").mkdir(exist_ok=True)
    sinfo = tmp / "bin" / "sinfo"
    sinfo.write_text(SINFO.format(calls=tmp / "calls", answer=tmp / "answer"))
    sinfo.chmod(0o755)
    return {"PATH": f"{tmp / 'bin'}:{os.environ['PATH']}", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
            "SLURM_NTASKS": "2", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[0-1]",
            "SLURM_STEP_NODELIST": "node[0-1]", **more}


def test_drained_draining_down_and_failing_nodes_are_leaving_the_rest_are_not():
    out = ("node0|mixed|none\nnode1|draining|lab-fault\nnode2|down*|Not responding\nnode3|idle|none\n"
           "node4|drained|bad gpu\nnode5|failing|xid 79\nnode1|draining|lab-fault\nnode6|allocated|none\n")
    assert nodewatch.leaving(out) == {"node1": ("draining", "lab-fault"), "node2": ("down", "Not responding"),
                                      "node4": ("drained", "bad gpu"), "node5": ("failing", "xid 79")}


def _polls(tmp: Path) -> int:
    """How many times the stand-in sinfo has been asked so far."""
    return len((tmp / "calls").read_text().splitlines()) if (tmp / "calls").exists() else 0


def _until(done, what: str) -> None:
    deadline = time.monotonic() + 30  # only stops a hung test: the bounds are counted in polls
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_node_drained_mid_run_is_said_once_within_two_polls(tmp_path):
    """Counted in polls, not seconds: the first poll that starts after the drain says it (one under way as it
    happened may too), and later polls that still see it say nothing. A poll every half the stall bound
    (poll_every) keeps that within the bound."""
    (tmp_path / "answer").write_text("node0|allocated|none\nnode1|allocated|none\n")
    said: list[str] = []
    at_poll: list[int] = []

    def say(line: str) -> None:  # the watch's thread, right after the poll that saw the drain
        at_poll.append(_polls(tmp_path))
        said.append(line)

    with nodewatch.watch(say, stall_s=1.0, environ=step_env(tmp_path)):
        _until(lambda: _polls(tmp_path) >= 2, "two polls")
        assert said == []
        before = _polls(tmp_path)
        (tmp_path / "answer.new").write_text("node0|allocated|none\nnode1|draining|lab-fault\n")
        os.replace(tmp_path / "answer.new", tmp_path / "answer")  # whole: a poll reads the old or the new
        _until(lambda: said, "the drain said")
        _until(lambda: _polls(tmp_path) >= at_poll[0] + 2, "two more polls")  # they see it still draining
    assert at_poll[0] - before <= 1, (before, at_poll)
    assert nodewatch.poll_every(1.0) == 0.5
    assert said == ["Warning: Slurm drained node1 mid-job (reason: lab-fault); this run goes on, but node1 is out "
                    "of service: check it (sinfo -R) before trusting the figures measured there."]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) >= 3 and all(c == "-h -N -n node0,node1 -o %N|%T|%E" for c in calls), calls


def test_a_node_set_down_is_named_with_its_state(tmp_path):
    (tmp_path / "answer").write_text("node1|down*|lab-fault\n")
    said: list[str] = []
    with nodewatch.watch(said.append, stall_s=1.0, environ=step_env(tmp_path)):
        t0 = time.monotonic()
        while not said and time.monotonic() - t0 < 5:
            time.sleep(0.05)
    assert said == ["Warning: Slurm set node1 DOWN mid-job (reason: lab-fault); Slurm ends this job's steps on "
                    "it, and the figures measured there since are suspect."]


def test_only_task_0_of_an_srun_step_asks_slurm(tmp_path):
    (tmp_path / "answer").write_text("node1|drained|x\n")
    for environ in (step_env(tmp_path, SLURM_PROCID="1"),  # another task: task 0 says it for the job
                    step_env(tmp_path, SLURM_STEP_ID="4294967291"),  # the batch script's own shell
                    {k: v for k, v in step_env(tmp_path).items() if not k.startswith("SLURM_")}):  # no Slurm
        said: list[str] = []
        with nodewatch.watch(said.append, stall_s=1.0, environ=environ):
            pass  # a watch that starts would ask sinfo at once
        assert said == [] and not (tmp_path / "calls").exists(), environ


def test_without_a_working_sinfo_the_watch_stops_quietly(tmp_path):
    environ = step_env(tmp_path)
    (tmp_path / "bin" / "sinfo").write_text(f"#!/bin/sh\necho \"$*\" >> \"{tmp_path / 'calls'}\"\n"
                                            "echo 'sinfo: error: cannot reach slurmctld' >&2\nexit 1\n")
    said: list[str] = []
    with nodewatch.watch(said.append, stall_s=1.0, environ=environ):
        _until(lambda: _polls(tmp_path) >= 1, "the first poll")
        time.sleep(0.6)  # past the next poll (every 0.5 s) of a watch that went on
    assert said == [] and _polls(tmp_path) == 1  # asked once, then no more
    assert nodewatch.poll_every(None) == nodewatch.POLL_S and nodewatch.poll_every(4) == 2.0
