"""Slurm's own faults, on the lab's real Slurm (fabricbench/cluster/slurm.py), against docs/multinode.md's
train recipe run long: scancel of the running step, a node set DOWN or drained mid-job, srun --time running
out, and two jobs sharing the nodes at once (the job-id port rule, read from the sockets each job opened).

    python3 -m pytest -q -m multinode tests/e2e/test_slurm_faults.py

Each ends with nothing left: no process of the job on any node, and (the fixture) no daemon, namespace or
state folder.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from fabricbench.cluster import env, slurm
from tests import slurmlab as sl

WHY = slurm.unavailable()
pytestmark = [pytest.mark.multinode, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

STALL = 20  # --stall-timeout of the long trains
SLACK = 15
# Steps of the long trains: more than this machine runs before Slurm's time limit strikes (a 1-minute
# --time is enforced up to ~30 s late, and 3000 steps once finished in 82 s), so every fault lands mid-run
STEPS = 30000


@pytest.fixture()
def lab():
    with slurm.cluster(2) as s:
        yield s
    assert not slurm.leftovers(s)


def long_train(*extra: str, srun: str = "") -> str:
    """The train recipe, run for many steps (each fault lands mid-run), `srun` options added."""
    text = sl.recipe(sl.MULTINODE, "train").replace("--steps 5", f"--steps {STEPS} --stall-timeout {STALL}")
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
    steps = int(re.search(rf"stopped after (\d+) of {STEPS} steps", node0).group(1))
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


def drained(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("Warning: Slurm drained ")]


def test_a_node_drained_mid_job_is_named_within_the_stall_bound(lab, tmp_path):
    """A drained node keeps its job (Slurm only gives it no new one), so nothing in the run fails: node 0's
    train names the node and the reason within the stall bound, and the run goes on."""
    p, job = start_past(lab, tmp_path, long_train(), "train")
    lab.scontrol("update", "nodename=node1", "state=drain", "reason=lab-fault")
    t0 = time.monotonic()
    sl.wait_for(lambda: drained(sl.output(tmp_path, "train")), STALL + SLACK, "the drained node named")
    took = time.monotonic() - t0
    out = sl.output(tmp_path, "train")
    print(f"named {took:.1f} s after node1 was drained:\n{out[-2000:]}")
    assert took < STALL, took
    (line,) = drained(out)
    assert line.startswith("Warning: Slurm drained node1 mid-job (reason: lab-fault); this run goes on"), line
    assert p.poll() is None and lab.job(job)["JobState"] == "RUNNING", out[-1500:]
    assert lab.node_states()["node1"].startswith("drain"), lab.node_states()
    before = sl.steps_under(tmp_path)
    sl.wait_for(lambda: sl.steps_under(tmp_path) > before, 60, "the run still stepping")
    lab.run("scancel", job)
    p.wait(timeout=slurm.KILL_WAIT_S + 60)
    no_tasks_left(lab)
    (rec,) = sl.records(tmp_path / "train.jsonl")
    check_ended_by_sigterm(sl.output(tmp_path, "train"), rec)
    assert len(drained(sl.output(tmp_path, "train"))) == 1  # once, however many polls saw it


def test_srun_time_running_out_keeps_the_steps_and_names_it(lab, tmp_path):
    p, job = start_past(lab, tmp_path, long_train(srun="--time 1"), "train")
    p.wait(timeout=180)
    out = sl.output(tmp_path, "train")
    print(out[-2000:])
    no_tasks_left(lab)
    assert lab.wait_job(job, 60)["JobState"] == "TIMEOUT"
    (rec,) = sl.records(tmp_path / "train.jsonl")
    check_ended_by_sigterm(out, rec)


def sockets(ns: str, state: str) -> list[tuple[str, str, int]]:
    """(local address:port, peer address:port, pid) of every TCP socket in `state` in namespace `ns`, as ss
    reads them from the kernel (a socket shared by several processes: once per process)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htnp", "state", state], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return [(f[2], f[3], int(pid)) for ln in out.splitlines() if len(f := ln.split()) >= 5
            for pid in re.findall(r"pid=(\d+)", ln)]


def job_of(pid: int) -> str | None:
    """The Slurm job a fabricbench process runs in (SLURM_JOB_ID in its environment, as slurmstepd set it
    for the task and its children); None for any other process (srun's and slurmstepd's own sockets)."""
    try:
        if b"fabricbench" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ids = [e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"SLURM_JOB_ID=")]
    return ids[0] if ids else None


def port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def host(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")


def test_two_jobs_sharing_the_nodes_meet_on_ports_of_their_own(lab, tmp_path):
    """Two train recipes at once, each one task per node on the same two nodes. Read from the kernel while
    both run: each job's store (its torchrun agent's listening port on node 0) is a port of its own, and
    every connection a job's processes on node 1 hold to node 0 reaches a port of that job, none of the
    other's."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    first = start_past(lab, dirs[0], long_train(), "train")
    p = sl.shell(lab, long_train(), dirs[1], "train")
    job = sl.wait_for(lambda: next((j for j, st in lab.jobs().items() if st == "RUNNING" and j != first[1]), None),
                      60, "the second job running beside the first")
    sl.wait_for(lambda: sl.steps_under(dirs[1]) >= 3 or p.poll() is not None, 300, "the second job past 3 steps")
    assert p.poll() is None and first[0].poll() is None, sl.output(dirs[1], "train")[-1500:]
    runs = [first, (p, job)]
    jobs = [j for _, j in runs]
    node0, node1 = lab.nodes
    listening: dict[str, set[int]] = {j: set() for j in jobs}
    stores: dict[str, set[int]] = {j: set() for j in jobs}
    for local, _, pid in sockets(node0.ns, "listening"):
        if job_of(pid) in listening:
            listening[job_of(pid)].add(port(local))
            if b"torch.distributed.run" in Path(f"/proc/{pid}/cmdline").read_bytes():
                stores[job_of(pid)].add(port(local))
    reached: dict[str, set[int]] = {j: set() for j in jobs}
    for _, peer, pid in sockets(node1.ns, "established"):
        if job_of(pid) in reached and host(peer) == node0.addr:
            reached[job_of(pid)].add(port(peer))
    print(f"jobs {jobs}: stores {stores}, node 0 listening {listening}, node 1 reached {reached}")
    a, b = jobs
    assert len(stores[a]) == 1 and len(stores[b]) == 1 and stores[a] != stores[b], stores
    for j in jobs:  # and each is the port docs/multinode.md promises for its job
        assert stores[j] == {env.SLURM_PORT_BASE + int(j) % env.SLURM_PORT_SPAN}, (j, stores)
    for mine, other in ((a, b), (b, a)):
        assert stores[mine] <= reached[mine], (mine, stores, reached)  # node 1 met its own job's store ...
        assert reached[mine] <= listening[mine] and not reached[mine] & listening[other], (mine, reached, listening)
    infos = [lab.job(j) for j in jobs]
    assert all(i["NodeList"] == "node[0-1]" for i in infos), infos  # they did share both nodes
    for (p, job), d in zip(runs, dirs):
        lab.run("scancel", job)
        p.wait(timeout=slurm.KILL_WAIT_S + 60)
        (rec,) = sl.records(d / "train.jsonl")
        assert rec["status"] == "interrupted", rec
    no_tasks_left(lab)


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
