"""Slurm's own faults, on the lab's real Slurm (fabricbench/cluster/slurm.py), against docs/multinode.md's
train recipe run long: scancel of the running step, a node set DOWN mid-job, srun --time running out, and
two jobs sharing the nodes at once (the job-id port rule).

    python3 -m pytest -q -m multinode tests/test_slurm_faults.py

Each ends with nothing left: no process of the job on any node, and (the fixture) no daemon, namespace or
state folder.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from fabricbench.cluster import slurm
from tests import slurmlab as sl

WHY = slurm.unavailable()
pytestmark = [pytest.mark.multinode, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

STALL = 20  # --stall-timeout of the long trains
SLACK = 15


@pytest.fixture()
def lab():
    with slurm.cluster(2) as s:
        yield s
    assert not slurm.leftovers(s)


def long_train(*extra: str, srun: str = "") -> str:
    """The train recipe, run for many steps (each fault lands mid-run), `srun` options added."""
    text = sl.recipe(sl.MULTINODE, "train").replace("--steps 5", f"--steps 3000 --stall-timeout {STALL}")
    text = text.replace("srun ", f"srun {srun} " if srun else "srun ", 1)
    return text.rstrip().rstrip("\\") + (" " + " ".join(extra) if extra else "") + "\n"


def start_past(s: slurm.Slurm, tmp, text: str, name: str, steps: int = 3) -> tuple[subprocess.Popen, str]:
    p = sl.shell(s, text, tmp, name)
    job = sl.running_job(s)
    sl.wait_for(lambda: sl.steps_under(tmp) >= steps or p.poll() is not None, 300, f"{name} past {steps} steps")
    assert p.poll() is None, sl.output(tmp, name)[-1500:]
    return p, job


def errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("Error:")]


def terminated(text: str) -> list[str]:
    """The line each node's train says when SIGTERM ends it (Slurm sends it first, KillWait before SIGKILL)."""
    return [ln for ln in text.splitlines() if ln.startswith("Terminated (SIGTERM)")]


def check_ended_by_sigterm(out: str, rec: dict) -> None:
    """One line per node naming SIGTERM; node 0's says where the finished steps went; they are there."""
    lines = terminated(out)
    assert len(lines) == 2 and not errors(out), out[-2000:]
    (node0,) = [ln for ln in lines if "written to train.jsonl" in ln]
    steps = int(re.search(r"stopped after (\d+) of 3000 steps", node0).group(1))
    assert rec["status"] == "interrupted" and rec["steps_completed"] >= 3, rec
    assert steps == rec["steps_completed"] and len(rec["step_times_s"]) == steps


def no_tasks_left(s: slurm.Slurm) -> None:
    sl.wait_for(lambda: not s.tasks(), 30, "every process of the job gone from the nodes")


def test_scancel_of_a_running_step_keeps_the_steps_and_names_it(lab, tmp_path):
    p, job = start_past(lab, tmp_path, long_train(), "train")
    lab.run("scancel", job)
    t0 = time.monotonic()
    p.wait(timeout=slurm.KILL_WAIT_S + 60)
    took = time.monotonic() - t0
    out = sl.output(tmp_path, "train")
    print(f"srun ended {took:.1f} s after scancel:\n{out[-2000:]}")
    no_tasks_left(lab)
    assert lab.wait_job(job, 60)["JobState"] == "CANCELLED"
    (rec,) = sl.records(tmp_path / "train.jsonl")
    check_ended_by_sigterm(out, rec)


def test_a_node_set_down_mid_job_is_named_within_the_stall_bound(lab, tmp_path):
    p, job = start_past(lab, tmp_path, long_train(), "train")
    lab.scontrol("update", "nodename=node1", "state=down", "reason=lab-fault")
    t0 = time.monotonic()
    p.wait(timeout=STALL + 90)
    took = time.monotonic() - t0
    out = sl.output(tmp_path, "train")
    print(f"srun ended {took:.1f} s after node1 went down:\n{out[-2000:]}")
    no_tasks_left(lab)
    assert took < STALL + SLACK, took
    # Slurm ends the whole job at once (node 1's processes killed, node 0's sent SIGTERM), so no rank sees a
    # peer die first: srun names the node, node 0's train the signal and where its finished steps went.
    assert "srun: error: Node failure on node1" in out, out[-2000:]
    (rec,) = sl.records(tmp_path / "train.jsonl")
    (line,) = terminated(out)
    assert "written to train.jsonl" in line and not errors(out), out[-2000:]
    assert rec["status"] == "interrupted" and rec["steps_completed"] >= 3, rec
    assert lab.wait_job(job, 60)["JobState"] in ("NODE_FAIL", "FAILED", "CANCELLED"), lab.job(job)


def test_srun_time_running_out_keeps_the_steps_and_names_it(lab, tmp_path):
    p, job = start_past(lab, tmp_path, long_train(srun="--time 1"), "train")
    p.wait(timeout=180)
    out = sl.output(tmp_path, "train")
    print(out[-2000:])
    no_tasks_left(lab)
    assert lab.wait_job(job, 60)["JobState"] == "TIMEOUT"
    (rec,) = sl.records(tmp_path / "train.jsonl")
    check_ended_by_sigterm(out, rec)


def test_two_jobs_sharing_the_nodes_meet_on_ports_of_their_own(lab, tmp_path):
    """Two train recipes at once, each one task per node on the same two nodes: MASTER_PORT from each
    job's id (20000 + id mod 20000), so neither takes the other's rendezvous."""
    a, b = tmp_path / "a", tmp_path / "b"
    ps = []
    for d in (a, b):
        d.mkdir()
        ps.append(sl.shell(lab, sl.recipe(sl.MULTINODE, "train"), d, "train"))
    sl.wait_for(lambda: len(lab.jobs()) == 2, 60, "both jobs known")
    for p in ps:
        p.wait(timeout=400)
    jobs = lab.jobs()
    assert len(jobs) == 2
    for d, p in zip((a, b), ps):
        assert p.returncode == 0, sl.output(d, "train")[-1500:]
        (rec,) = sl.records(d / "train.jsonl")
        assert rec["status"] == "ok" and rec["nranks"] == 2 and rec["hosts"] == ["node0", "node1"]
    infos = [lab.job(j) for j in sorted(jobs, key=int)]
    assert all(i["NodeList"] == "node[0-1]" for i in infos), infos  # they did share both nodes
    # and ran at once (both RUNNING together), so each had its own port
    starts = [time.strptime(i["StartTime"], "%Y-%m-%dT%H:%M:%S") for i in infos]
    ends = [time.strptime(i["EndTime"], "%Y-%m-%dT%H:%M:%S") for i in infos]
    assert max(starts) < min(ends), infos
    assert len({re.sub(r"\D", "", j) for j in jobs}) == 2


def test_a_requeued_job_resumes_losing_no_record(lab, tmp_path):
    """A batch job of the sweep recipe with --resume, requeued mid-sweep (scontrol requeue: what Slurm does
    to a job whose node failed, with --requeue): the second run keeps every record of the first and measures
    only the sizes it lacks."""
    srun = sl.recipe(sl.MULTINODE, "sweep").replace("--sizes 1M,4M", "--sizes 256K-8M:x2").replace(
        "--iters 3", "--iters 10").rstrip().rstrip("\\") + " --resume\n"
    (tmp_path / "sweep.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes 2 --ntasks-per-node 1 --requeue\n"
                                           + srun)
    sub = sl.run(lab, "sbatch --parsable --output slurm-%j.out sweep.sbatch", tmp_path, "sbatch", 60)
    job = sub.strip().split(";")[0]
    done = lambda: [r for r in sl.records(tmp_path / "sweep.jsonl") if r.get("kind") == "collective"]
    sl.wait_for(lambda: len(done()) >= 2, 300, "the sweep past 2 sizes")
    before = done()
    assert len(before) < 6, "the sweep ended before the requeue: nothing left to resume"
    lab.scontrol("requeue", job)
    sl.wait_for(lambda: lab.job(job).get("Restarts") == "1", 60, "the job requeued")
    if lab.job(job).get("JobState") == "PENDING":  # a requeued job waits its BeginTime: start it now
        lab.scontrol("update", f"jobid={job}", "starttime=now")
    info = lab.wait_job(job, 400)
    log = "".join(f.read_text(errors="replace") for f in tmp_path.glob("slurm-*.out"))
    assert info["JobState"] == "COMPLETED", (info, log[-2000:])
    after = done()
    sizes = [r["bytes"] for r in after if r["status"] == "ok"]
    assert sorted(sizes) == sorted(set(sizes)) and len(sizes) == 6, (sizes, log[-1500:])  # 256K..8M, each once
    assert all(r in after for r in before)  # what the first run measured is still there, unchanged
    assert all(r["extra"]["hosts"] == ["node0", "node1"] for r in after)
    no_tasks_left(lab)
