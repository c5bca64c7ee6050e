"""The emulated multi-node lab (fabricbench/cluster/lab.py): two nodes (network namespaces with their own
hostnames) on a 1 gbit link, one `fabricbench train` per node, each launching torchrun for its ranks.

    python3 -m pytest -q -m multinode tests/e2e/test_multinode.py

Skipped, with the reason, where the lab cannot be built (no root, ip, tc, unshare or namespaces). The
commands are docs/multinode.md's torchrun recipe for train, with the lab's addresses.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fabricbench import procs
from fabricbench.cluster import lab
from proctree import wait_for
from slurmlab import steps_under
from roots import DATA

WHY = lab.unavailable()
pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

PORT = 29400 + os.getpid() % 500  # inside the lab's namespaces: no other test's port
SLACK = 15


def train_argv(node: lab.Node, nodes: list[lab.Node], out: Path, *extra: str, steps: int = 5) -> list[str]:
    """docs/multinode.md, "train with torchrun": one command per node."""
    return [sys.executable, "-m", "fabricbench", "train", "--strategies", "ddp", "--model", "tiny-mistral",
            "--device", "cpu", "--nprocs", "1", "--nnodes", str(len(nodes)), "--node-rank", str(node.index),
            "--master-addr", nodes[0].addr, "--master-port", str(PORT), "--steps", str(steps),
            "--warmup-steps", "2", "--batch-size", "2", "--seq-len", "16", "--trace-steps", "0", "--repeats", "1",
            "--target-ci", "0", "--out", str(out / f"{node.name}.jsonl"), *extra]


def start(node, nodes, tmp, *extra, steps=5):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0")
    err = open(tmp / f"{node.name}.err", "w")
    return node.popen(train_argv(node, nodes, tmp, *extra, steps=steps), env=env, stdout=err, stderr=err)


def errors(tmp: Path, node) -> list[str]:
    return [ln for ln in (tmp / f"{node.name}.err").read_text().splitlines() if ln.startswith("Error:")]


def records(tmp: Path, node) -> list[dict]:
    f = tmp / f"{node.name}.jsonl"
    return [json.loads(ln) for ln in f.read_text().splitlines()] if f.exists() else []


def steps_of(pid: int) -> int:
    """Steps rank files of the train process `pid` hold (its workspace, TMPDIR of its job)."""
    for d in Path(tempfile.gettempdir()).glob(f"{procs.TEMP_PREFIX}{pid}-train-*"):
        for f in d.glob("rank-*.json"):
            try:
                return len(json.loads(f.read_text()).get("step_times_s") or [])
            except (OSError, ValueError):
                pass
    return 0


def test_train_across_two_nodes_names_both_hosts(tmp_path):
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = [start(nd, nodes, tmp_path) for nd in nodes]
        lab.wait_all(ps, 400)
        assert [p.returncode for p in ps] == [0, 0], [(tmp_path / f"{nd.name}.err").read_text()[-600:] for nd in nodes]
    assert not lab.leftovers(nodes)
    (rec,) = records(tmp_path, nodes[0])
    assert records(tmp_path, nodes[1]) == []  # node 0 writes the records
    assert rec["status"] == "ok" and rec["nranks"] == 2 and rec["nnodes"] == 2
    assert rec["hosts"] == ["node0", "node1"]
    assert rec["nodes"] == [{"host": "node0", "ranks": [0]}, {"host": "node1", "ranks": [1]}]
    assert len(rec["memory"]["peak_allocated_bytes"]) == 2 and len(rec["holdings"]) == 2
    assert len(rec["step_times_s"]) == 5 and all(t > 0 for t in rec["step_times_s"])


def test_a_node_that_never_joins_is_named_within_the_timeout(tmp_path):
    timeout = 20
    with lab.cluster(2, rate="1gbit") as nodes:
        p = start(nodes[0], nodes, tmp_path, "--timeout", str(timeout))
        t0 = time.monotonic()
        p.wait(timeout=timeout + 120)
        took = time.monotonic() - t0
    assert not lab.leftovers(nodes)
    print(f"ended after {took:.1f} s")
    # start-up of python and torchrun comes before the rendezvous's clock starts: a few s on a loaded box
    assert p.returncode == 1 and took < timeout + SLACK + 10, took
    (line,) = errors(tmp_path, nodes[0])
    assert "node 1 (rank 1) did not join within --timeout 20 s" in line, line
    (rec,) = records(tmp_path, nodes[0])
    assert rec["status"] == "error" and rec["nodes_missing"] == [1]


@pytest.mark.parametrize("fault", ["killed", "unplugged"])
def test_a_dead_node_ends_the_other_within_the_stall_bound_naming_it(tmp_path, fault):
    stall = 20
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = [start(nd, nodes, tmp_path, "--timeout", "300", "--stall-timeout", str(stall), steps=2000)
              for nd in nodes]
        wait_for(lambda: steps_of(ps[0].pid) >= 3 or ps[0].poll() is not None, 300, "node 0 past 3 steps")
        assert ps[0].poll() is None, (tmp_path / "node0.err").read_text()
        if fault == "killed":
            nodes[1].kill()
        else:
            nodes[1].unplug()
        t0 = time.monotonic()
        ps[0].wait(timeout=stall + 90)
        took = time.monotonic() - t0
        if fault == "unplugged":  # node 1 lost node 0 (its store): it ends too, naming node 0
            ps[1].wait(timeout=stall + 90)
            assert ps[1].returncode == 1
            (line1,) = errors(tmp_path, nodes[1])
            assert "node node0 (ranks 0) is unreachable" in line1, line1
    assert not lab.leftovers(nodes)
    print(f"{fault}: node 0 ended {took:.1f} s after the fault")
    assert ps[0].returncode == 1 and took < stall + SLACK, took
    (line,) = errors(tmp_path, nodes[0])
    assert "ddp: rank 1 (host node1)" in line, line
    (rec,) = records(tmp_path, nodes[0])
    assert rec["status"] == "error" and rec["rank_died"] == 1 and rec["ranks_died"] == [1]
    assert rec["steps_completed"] >= 3 and len(rec["step_times_s"]) == rec["steps_completed"]


def sweep_argv(node: lab.Node, nodes: list[lab.Node], out: Path, launcher: str) -> tuple[list[str], dict]:
    """docs/multinode.md, "sweep": torchrun, one agent per node; or what srun starts (one task per node,
    Slurm's variables, which fabricbench turns into torchrun's: fabricbench/cluster/env.py)."""
    sweep = ["-m", "fabricbench", "sweep", "--engine", "torch", "--backend", "gloo", "--ops", "all_reduce",
             "--sizes", "1M,4M", "--iters", "3", "--warmup", "1", "--timeout", "60", "--quiet",
             "--out", str(out / f"{node.name}.jsonl")]
    # TMPDIR: a torchrun started by hand (not by fabricbench) leaves its torchelastic_* folders there
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", TMPDIR=str(out))
    if launcher == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(nodes)), "--nproc-per-node", "1",
                "--node-rank", str(node.index), "--master-addr", nodes[0].addr, "--master-port", str(PORT),
                "--rdzv-conf", "timeout=60", *sweep], env
    env.update(SLURM_STEP_ID="0", SLURM_PROCID=str(node.index), SLURM_NTASKS=str(len(nodes)), SLURM_LOCALID="0",
               SLURM_NODEID=str(node.index), SLURM_JOB_NODELIST=f"node[0-{len(nodes) - 1}]", SLURM_JOB_ID="4242",
               MASTER_PORT=str(PORT))
    return [sys.executable, *sweep], env


@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_sweep_across_two_nodes_follows_the_shaped_link(tmp_path, launcher):
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = []
        for nd in nodes:
            argv, env = sweep_argv(nd, nodes, tmp_path, launcher)
            err = open(tmp_path / f"{nd.name}.err", "w")
            ps.append(nd.popen(argv, env=env, stdout=err, stderr=err))
        lab.wait_all(ps, 400)
        assert [p.returncode for p in ps] == [0, 0], [(tmp_path / f"{nd.name}.err").read_text()[-600:] for nd in nodes]
    assert not lab.leftovers(nodes)
    recs = [r for r in records(tmp_path, nodes[0]) if r.get("kind") == "collective"]
    assert records(tmp_path, nodes[1]) == []  # rank 0 writes the records
    assert len(recs) == 2 and all(r["status"] == "ok" and r["nranks"] == 2 for r in recs)
    assert all(r["extra"]["hosts"] == ["node0", "node1"] for r in recs)
    # 1 gbit = 0.125 GB/s each way; an all-reduce of 2 ranks moves S each way: busbw at most the link's
    big = max(recs, key=lambda r: r["bytes"])
    assert 0.02 < big["busbw_gbps"] < 0.125 * 1.1, big["busbw_gbps"]


def test_qualify_across_two_nodes_names_both(tmp_path):
    """docs/multinode.md, "qualify": torchrun on each node with a cluster spec; rank 0's report names every
    node and its Reproduce line starts with the launcher."""
    spec = DATA / "qualify" / "gloo_e2e.toml"
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = []
        for nd in nodes:
            argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                    "--node-rank", str(nd.index), "--master-addr", nodes[0].addr, "--master-port", str(PORT),
                    "--rdzv-conf", "timeout=120", "-m", "fabricbench", "qualify", "--spec", str(spec),
                    "--out", str(tmp_path / nd.name), "--quiet"]
            err = open(tmp_path / f"{nd.name}.err", "w")
            ps.append(nd.popen(argv, env=dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1",
                                                     TMPDIR=str(tmp_path)),
                               stdout=err, stderr=err))
        lab.wait_all(ps, 500)
        assert [p.returncode for p in ps] == [0, 0], [(tmp_path / f"{nd.name}.err").read_text()[-600:] for nd in nodes]
    assert not lab.leftovers(nodes)
    report = (tmp_path / "node0" / "report.md").read_text()
    assert "node0, node1" in report
    assert "python -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank NODE --master-addr " \
           f"{nodes[0].addr} --master-port {PORT} -m fabricbench qualify --spec" in report
    assert not (tmp_path / "node1" / "report.md").exists()


def study_argv(node: lab.Node, nodes: list[lab.Node], out: Path, *extra: str, steps: int = 4) -> list[str]:
    """docs/multinode.md, "study": the same command on every node, with its --node-rank; one --out for all
    (as on a shared filesystem: only node 0 writes it)."""
    return [sys.executable, "-m", "fabricbench", "study", "--device", "cpu", "--nprocs", "2",
            "--nnodes", str(len(nodes)), "--node-rank", str(node.index), "--master-addr", nodes[0].addr,
            "--master-port", str(PORT), "--strategies", "ddp", "--fabrics", "default", "--model", "tiny-mistral",
            "--steps", str(steps), "--warmup-steps", "1", "--batch-size", "2", "--seq-len", "16", "--repeats", "1",
            "--target-ci", "0", "--sizes", "64K,1M", "--quiet", "--out", str(out / "study"), *extra]


def start_study(node, nodes, tmp, *extra, steps=4):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", TMPDIR=str(tmp))
    err = open(tmp / f"{node.name}.err", "w")
    return node.popen(study_argv(node, nodes, tmp, *extra, steps=steps), env=env, stdout=err, stderr=err)


def test_study_across_two_nodes_sets_intra_against_inter_node_busbw(tmp_path):
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = [start_study(nd, nodes, tmp_path) for nd in nodes]
        lab.wait_all(ps, 600)
        assert [p.returncode for p in ps] == [0, 0], [(tmp_path / f"{nd.name}.err").read_text()[-800:] for nd in nodes]
    assert not lab.leftovers(nodes)
    recs = [json.loads(ln) for ln in (tmp_path / "study" / "results.jsonl").read_text().splitlines()]
    (plan,) = [r for r in recs if r["kind"] == "plan"]  # node 0 alone wrote the shared folder
    assert plan["study"]["nodes"] == ["node0", "node1"]
    assert sorted((r["node"]["index"], r["node"]["host"]) for r in recs if r["kind"] == "machine") == \
        [(0, "node0"), (1, "node1")]
    (train,) = [r for r in recs if r["kind"] == "train"]
    assert train["status"] == "ok" and train["nranks"] == 4 and train["nnodes"] == 2
    assert train["nodes"] == [{"host": "node0", "ranks": [0, 1]}, {"host": "node1", "ranks": [2, 3]}]
    colls = [r for r in recs if r["kind"] == "collective" and r["status"] == "ok"]
    inter = {(r["op"], r["bytes"]): r for r in colls if r["study"]["unit"] == "sweep @ default"}
    intra = {(r["op"], r["bytes"]): r for r in colls if r["study"]["unit"] == "intra-node sweep @ default"}
    assert set(inter) == set(intra) and inter, (sorted(inter), sorted(intra))
    assert all(r["nranks"] == 4 and r["extra"]["hosts"] == ["node0", "node1"] for r in inter.values())
    assert all(r["nranks"] == 2 and r["extra"]["hosts"] == ["node0"] for r in intra.values())
    # across the 1 gbit link (0.125 GB/s each way) an all-reduce's busbw cannot beat the link; inside node 0
    # (loopback) nothing limits it so: the report's ratio says the link costs
    big = inter[("all_reduce", 1 << 20)]
    assert big["busbw_gbps"] < 0.125 * 1.1, big["busbw_gbps"]
    report = (tmp_path / "study" / "report.md").read_text()
    section = report.split("## Across nodes", 1)[1].split("\n## ", 1)[0]
    assert "| 0 | node0 | 0, 1 |" in section and "| 1 | node1 | 2, 3 |" in section
    assert "intra-node busbw (2 ranks)" in section and "across 2 nodes (4 ranks)" in section
    assert "At 1M all_reduce, 2 nodes reach" in section
    assert "study: node 1 ran its 3 share(s)" in (tmp_path / "node1.err").read_text()


def test_a_study_node_that_never_joins_is_named_within_the_join_timeout(tmp_path):
    join = 20
    with lab.cluster(2, rate="1gbit") as nodes:
        t0 = time.monotonic()
        p = start_study(nodes[0], nodes, tmp_path, "--join-timeout", str(join))
        p.wait(timeout=join + 120)
        took = time.monotonic() - t0
        q = start_study(nodes[1], nodes, tmp_path, "--join-timeout", str(join))  # and node 0 never comes
        t1 = time.monotonic()
        q.wait(timeout=join + 120)
        took1 = time.monotonic() - t1
    assert not lab.leftovers(nodes)
    print(f"node 0 ended after {took:.1f} s, node 1 after {took1:.1f} s")
    assert p.returncode == 1 and took < join + SLACK, took
    (line,) = errors(tmp_path, nodes[0])
    assert line.startswith("Error: node(s) 1 did not join the study within --join-timeout 20 s"), line
    assert not (tmp_path / "study" / "results.jsonl").exists()  # nothing was started
    assert q.returncode == 1 and took1 < join + SLACK, took1
    (line1,) = errors(tmp_path, nodes[1])
    assert "node 0 did not answer" in line1 and nodes[0].addr in line1, line1


def test_a_study_node_killed_mid_run_ends_node_0_naming_it_with_the_steps_kept(tmp_path):
    stall = 20
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = [start_study(nd, nodes, tmp_path, "--stall-timeout", str(stall), steps=2000) for nd in nodes]
        unit_log = tmp_path / "study" / "units" / "train_ddp_default.log"
        wait_for(lambda: steps_under(tmp_path) >= 3 or ps[0].poll() is not None, 400, "the train unit past 3 steps")
        assert ps[0].poll() is None, (tmp_path / "node0.err").read_text()
        nodes[1].kill()
        t0 = time.monotonic()
        ps[0].wait(timeout=stall + 120)
        took = time.monotonic() - t0
    assert not lab.leftovers(nodes)
    print(f"node 0 ended {took:.1f} s after node 1 was killed")
    assert ps[0].returncode == 1 and took < stall + SLACK, took
    (line,) = errors(tmp_path, nodes[0])
    assert "node 1 (node1) stopped answering" in line, line
    recs = [json.loads(ln) for ln in (tmp_path / "study" / "results.jsonl").read_text().splitlines()]
    (train,) = [r for r in recs if r["kind"] == "train"]
    assert train["status"] == "error" and train["steps_completed"] >= 3 and train["ranks_died"]
    unit = [r for r in recs if r["kind"] == "study_unit" and r["name"] == "train ddp @ default"][-1]
    assert unit["status"] == "error" and "node 1 (node1) stopped answering" in unit["message"]
    assert (tmp_path / "study" / "report.md").exists() and unit_log.exists()


