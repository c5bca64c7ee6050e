"""A study across two emulated nodes of one rank each: two nodes of one GPU make two
ranks, so the study runs what can run (the sweep across the nodes and the training, one job of both
nodes' ranks) and waives the intra-node sweep, saying why.

    python3 -m pytest -q -m multinode tests/e2e/test_multinode_single.py      (about a minute on 2 cores)

The lab and its commands are tests/e2e/test_multinode.py's (docs/multinode.md's study recipe), with --nprocs 1.
"""

from __future__ import annotations

import json

import pytest

from fabricbench.cluster import lab
from tests.e2e import test_multinode as lab_tests

pytestmark = [pytest.mark.multinode, pytest.mark.slow,
              pytest.mark.skipif(lab_tests.WHY is not None, reason=lab_tests.WHY or "")]


def test_study_across_two_nodes_of_one_rank_each(tmp_path, monkeypatch):
    real = lab_tests.study_argv

    def one_rank(*a, **kw):
        argv = real(*a, **kw)
        argv[argv.index("--nprocs") + 1] = "1"
        return argv

    monkeypatch.setattr(lab_tests, "study_argv", one_rank)
    with lab.cluster(2, rate="1gbit") as nodes:
        ps = [lab_tests.start_study(nd, nodes, tmp_path, "--fabrics", "default,p2p-off") for nd in nodes]
        lab.wait_all(ps, 600)
        assert [p.returncode for p in ps] == [0, 0], [(tmp_path / f"{nd.name}.err").read_text()[-800:] for nd in nodes]
    assert not lab.leftovers(nodes)
    recs = [json.loads(ln) for ln in (tmp_path / "study" / "results.jsonl").read_text().splitlines()]
    units = {r["name"]: r for r in recs if r["kind"] == "study_unit"}
    assert units["train ddp @ default"]["status"] == "ok" and units["sweep @ default"]["status"] == "ok"
    assert units["intra-node sweep @ default"]["status"] == "waived"
    assert "one rank per node" in units["intra-node sweep @ default"]["message"]
    assert units["sweep @ p2p-off"]["status"] == "waived" and "change nothing" in units["sweep @ p2p-off"]["message"]
    (train,) = [r for r in recs if r["kind"] == "train"]
    assert train["nranks"] == 2 and train["nnodes"] == 2
    assert train["nodes"] == [{"host": "node0", "ranks": [0]}, {"host": "node1", "ranks": [1]}]
    colls = [r for r in recs if r["kind"] == "collective" and r["status"] == "ok"]
    assert colls and all(r["nranks"] == 2 and r["extra"]["hosts"] == ["node0", "node1"] for r in colls)
    section = (tmp_path / "study" / "report.md").read_text().split("## Across nodes", 1)[1].split("\n## ", 1)[0]
    assert "intra-node sweeps are waived" in section
