"""Every srun and sbatch recipe of docs/multinode.md and docs/qualify.md, as written, on a real Slurm of two
emulated nodes (fabricbench/cluster/slurm.py): sweep, train, study and qualify across the nodes, with 1 and 2
tasks per node where the command takes ranks from Slurm's tasks.

    python3 -m pytest -q -m multinode tests/unit/test_slurm_recipes.py

The recipes are read from the pages (tests/slurmlab.py), so page and test cannot drift; the lab's stand-ins
for GPUs are slurmlab.LAB_HARDWARE. Skipped, with the one-line reason, where Slurm is not installed or the
lab cannot be built (no root, ip, tc, unshare).
"""

from __future__ import annotations

import json

import pytest

from fabricbench.cluster import env, slurm
from tests import slurmlab as sl

WHY = slurm.unavailable()
pytestmark = [pytest.mark.multinode, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

HOSTS = ["node0", "node1"]  # the lab's nodes, as SLURM_JOB_NODELIST names them (node[0-1])


def given(s: slurm.Slurm) -> list[str]:
    """The hosts Slurm gave the last job (its NodeList, expanded)."""
    last = max(s.jobs(), key=int)
    return env.expand_nodelist(s.job(last)["NodeList"])


@pytest.fixture()
def lab():
    with slurm.cluster(2) as s:
        yield s
        assert not s.tasks(), "a job left processes on the nodes"
    assert not slurm.leftovers(s)


def test_the_pages_have_the_recipes():
    assert [s for s, _ in sl.blocks(sl.MULTINODE)] == ["sweep", "train", "qualify", "study"]
    (fleet,) = sl.blocks(sl.QUALIFY)
    assert fleet[1].startswith("#!/") and "#SBATCH" in fleet[1]


@pytest.mark.parametrize("per_node", [1, 2])
def test_sweep_recipe(lab, tmp_path, per_node):
    sl.run(lab, sl.per_node(sl.recipe(sl.MULTINODE, "sweep"), per_node), tmp_path, "sweep", 300)
    recs = [r for r in sl.records(tmp_path / "sweep.jsonl") if r.get("kind") == "collective"]
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), recs
    assert all(r["nranks"] == 2 * per_node and r["extra"]["hosts"] == given(lab) == HOSTS for r in recs)
    # the 1 gbit link (0.125 GB/s each way) bounds an all-reduce whose ranks span both nodes
    big = max(recs, key=lambda r: r["bytes"])
    assert 0 < big["busbw_gbps"] < 0.125 * 1.1, big["busbw_gbps"]


def test_train_recipe(lab, tmp_path):
    out = sl.run(lab, sl.recipe(sl.MULTINODE, "train"), tmp_path, "train", 400)
    (rec,) = sl.records(tmp_path / "train.jsonl")  # one file on the shared folder: node 0 wrote it alone
    assert rec["status"] == "ok" and rec["nranks"] == 2 and rec["nnodes"] == 2, (rec.get("message"), out[-800:])
    assert rec["hosts"] == given(lab) == HOSTS
    assert rec["nodes"] == [{"host": "node0", "ranks": [0]}, {"host": "node1", "ranks": [1]}]
    assert len(rec["step_times_s"]) == 5 and all(t > 0 for t in rec["step_times_s"])


def test_study_recipe(lab, tmp_path):
    out = sl.run(lab, sl.recipe(sl.MULTINODE, "study"), tmp_path, "study", 600)
    recs = sl.records(tmp_path / "study" / "results.jsonl")
    (plan,) = [r for r in recs if r["kind"] == "plan"]
    assert plan["study"]["nodes"] == given(lab) == HOSTS, out[-800:]
    assert sorted((r["node"]["index"], r["node"]["host"]) for r in recs if r["kind"] == "machine") == \
        [(0, "node0"), (1, "node1")]
    (train,) = [r for r in recs if r["kind"] == "train"]
    assert train["status"] == "ok" and train["nranks"] == 4 and train["nnodes"] == 2
    assert train["nodes"] == [{"host": "node0", "ranks": [0, 1]}, {"host": "node1", "ranks": [2, 3]}]
    inter = [r for r in recs if r["kind"] == "collective" and r["study"]["unit"] == "sweep @ default"]
    assert inter and all(r["status"] == "ok" and r["extra"]["hosts"] == HOSTS for r in inter)
    assert "## Across nodes" in (tmp_path / "study" / "report.md").read_text()


@pytest.mark.parametrize("per_node", [1, 2])
def test_qualify_recipe(lab, tmp_path, per_node):
    sl.spec(tmp_path, "my-cluster.toml")
    out = sl.run(lab, sl.per_node(sl.recipe(sl.MULTINODE, "qualify"), per_node), tmp_path, "qualify", 500)
    report = (tmp_path / "qualify" / "report.md").read_text()
    assert "node0, node1" in report, out[-800:]
    assert f"srun --nodes 2 --ntasks {2 * per_node} python -m fabricbench qualify --spec" in report
    colls = [r for r in sl.records(tmp_path / "qualify" / "results.jsonl") if r.get("kind") == "collective"]
    assert colls and all(r["nranks"] == 2 * per_node and r["extra"]["hosts"] == given(lab) == HOSTS for r in colls)


def test_fleet_sbatch_recipe(lab, tmp_path):
    """docs/qualify.md's batch script: each node qualified on its own (one report per node), the fleet
    judged from them, then one cross-node run under srun torchrun."""
    sl.spec(tmp_path, "my-node.toml")
    sl.spec(tmp_path, "cluster.toml")
    (script,) = [t for _, t in sl.blocks(sl.QUALIFY)]
    (tmp_path / "fleet.sbatch").write_text(sl.on_the_lab(script))
    sl.run(lab, "sbatch --wait --output slurm-%j.out fleet.sbatch", tmp_path, "sbatch", 900)
    (log,) = tmp_path.glob("slurm-*.out")
    for host in HOSTS:  # one report per node, each of that node alone
        report = (tmp_path / "q" / host / "report.md").read_text()
        assert f"host {host}" in report or host in report.split("\n## ", 1)[0], log.read_text()[-800:]
        recs = sl.records(tmp_path / "q" / host / "results.jsonl")
        colls = [r for r in recs if r.get("kind") == "collective"]
        assert colls and all(r["extra"]["hosts"] == [host] for r in colls), (host, log.read_text()[-800:])
    fleet = json.loads((tmp_path / "q" / "fleet" / "fleet.json").read_text())
    assert sorted(n["host"] for n in fleet["nodes"]) == HOSTS
    report = (tmp_path / "q" / "cluster" / "report.md").read_text()
    assert "node0, node1" in report
