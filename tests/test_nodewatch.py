"""fabricbench/cluster/nodewatch.py against a stand-in sinfo (a script on PATH answering as Slurm 22.05's
`sinfo -h -N -n NODES -o %N|%T|%E` does); the real Slurm's drain is tests/test_slurm_faults.py's.

    python3 -m pytest -q -n0 tests/test_nodewatch.py
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


def test_a_node_drained_mid_run_is_said_once_within_two_polls(tmp_path):
    (tmp_path / "answer").write_text("node0|allocated|none\nnode1|allocated|none\n")
    said: list[str] = []
    with nodewatch.watch(said.append, stall_s=1.0, environ=step_env(tmp_path)):
        time.sleep(0.7)
        assert said == []
        (tmp_path / "answer").write_text("node0|allocated|none\nnode1|draining|lab-fault\n")
        t0 = time.monotonic()
        while not said and time.monotonic() - t0 < 5:
            time.sleep(0.05)
        took = time.monotonic() - t0
        time.sleep(1.1)  # more polls see it still draining: no second line
    assert took < 1.0, took  # the stall bound (1 s): polled every half of it
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
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\necho 'sinfo: error: cannot reach slurmctld' >&2\nexit 1\n")
    said: list[str] = []
    t0 = time.monotonic()
    with nodewatch.watch(said.append, stall_s=1.0, environ=environ):
        time.sleep(0.3)
    assert said == [] and time.monotonic() - t0 < 2
    assert nodewatch.poll_every(None) == nodewatch.POLL_S and nodewatch.poll_every(4) == 2.0
