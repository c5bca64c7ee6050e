"""The lab's Slurm itself (fabricbench/cluster/slurm.py): why it cannot start, in one line; a job's hosts; and a
SIGKILLed run's daemons, jobs, namespaces and state folder reaped by the next start.

    python3 -m pytest -q -m multinode tests/e2e/test_slurm_lab.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fabricbench.cluster import lab as netlab
from fabricbench.cluster import slurm
from tests import slurmlab as sl

WHY = slurm.unavailable()
needs_slurm = [pytest.mark.multinode, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


def test_without_slurm_it_says_what_to_install(monkeypatch):
    if netlab.unavailable():
        pytest.skip(netlab.unavailable())  # that line comes first: checked in tests/e2e/test_multinode.py
    monkeypatch.setattr(slurm, "_which", lambda name: None if name in ("slurmd", "munged") else "/bin/" + name)
    why = slurm.unavailable()
    assert why == ("the lab's Slurm needs Slurm and munge installed (munged, slurmd not found): "
                   "apt-get install slurm-wlm munge"), why
    with pytest.raises(RuntimeError, match="apt-get install slurm-wlm munge"):
        with slurm.cluster(2):
            pass


@pytest.mark.multinode
@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_srun_runs_a_task_on_each_node_under_its_hostname(tmp_path):
    with slurm.cluster(2) as s:
        out = sl.run(s, "srun --nodes 2 --ntasks-per-node 1 hostname", tmp_path, "hostname", 60)
        assert sorted(out.split()) == ["node0", "node1"]
        sl.wait_for(lambda: s.node_states() == {"node0": "idle", "node1": "idle"}, 30, "both nodes idle again")
    assert not slurm.leftovers(s)


HOLDER = """
import sys, time
from fabricbench.cluster import slurm
with slurm.cluster(2) as s:
    p = s.popen(["srun", "--nodes", "2", "sleep", "600"])
    while not s.tasks():
        time.sleep(0.2)
    print(s.state, *(nd.ns for nd in s.nodes), flush=True)
    time.sleep(600)
"""


@pytest.mark.multinode
@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_a_sigkilled_run_is_reaped_by_the_next_start(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        line = holder.stdout.readline().split()
        assert line, "the holder did not start its Slurm"
        state, nss = Path(line[0]), line[1:]
        pids = [pid for ns in nss for pid in netlab.namespace_pids(ns)]
        names = {slurm._comm(pid) for pid in pids}
        assert {"munged", "slurmctld", "slurmd", "slurmstepd", "sleep"} <= names, names
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # the run alone: its daemons and job live on, as after a kill -9
        holder.wait(timeout=30)
    assert state.exists() and all(netlab.namespace_pids(ns) for ns in nss)
    gone = slurm.reap_stale()  # what every start does first
    assert str(state) in gone and set(nss) <= set(gone), gone
    assert not state.exists()
    assert not [pid for pid in pids if sl.alive(pid)]
    assert not set(nss) & set(netlab.shaped.namespaces())
    assert not [ns for ns in nss if (netlab.NETNS_ETC / ns).exists()]
