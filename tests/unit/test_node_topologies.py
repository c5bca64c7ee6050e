"""A sweep across nodes names every node's wiring: each other node's first local rank sends its topology
snapshot with its host (measuring/ranks.all_ranks_info), and rank 0 gets {host: snapshot} to write as
topology records. Ranks simulated here in one process through a dict store, hosts and snapshots faked."""

from __future__ import annotations

import json

import pytest

from fabricbench.measuring import rendezvous as runner
from fabricbench.measuring.session import DistContext


class Store(dict):
    def set(self, key, value):
        self[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        return self[key]


@pytest.fixture()
def two_nodes(monkeypatch):
    """4 ranks, 2 per node (node0: ranks 0-1, node1: ranks 2-3); each host's snapshot names it."""
    where = {"host": "node0"}
    monkeypatch.setattr("socket.gethostname", lambda: where["host"])
    monkeypatch.setattr(runner.topology, "snapshot", lambda: {"gpus": [{"index": 0, "name": f"GPU of {where['host']}"}],
                                                              "links": [], "source": "fake"})
    return where


def test_rank_0_learns_every_other_node_s_topology(two_nodes):
    store = Store()
    for rank in (3, 2, 1):  # the others first: rank 0 reads what they set
        two_nodes["host"] = "node1" if rank >= 2 else "node0"
        dist = DistContext(rank=rank, world_size=4, local_rank=rank % 2, store=store)
        assert runner.all_ranks_info(dist, "r", {"devices": [rank % 2], "gpu_names": ["X"]}) == \
            {"devices": [rank % 2], "gpu_names": ["X"]}
    sent = {r: json.loads(store[f"r/info/{r}"]) for r in (1, 2, 3)}
    assert "topology" in sent[2] and "topology" not in sent[3] and "topology" not in sent[1]  # first local ranks
    two_nodes["host"] = "node0"
    info = runner.all_ranks_info(DistContext(rank=0, world_size=4, local_rank=0, store=store), "r",
                                  {"devices": [0], "gpu_names": ["X"]})
    assert info["hosts"] == ["node0", "node1"] and info["gpus"] == [0, 1, 0, 1]
    assert info["node_topologies"] == {"node1": {"gpus": [{"index": 0, "name": "GPU of node1"}], "links": [],
                                                 "source": "fake"}}


def test_one_node_sends_no_snapshot(two_nodes):
    store = Store()
    runner.all_ranks_info(DistContext(rank=1, world_size=2, local_rank=1, store=store), "r", {})
    info = runner.all_ranks_info(DistContext(rank=0, world_size=2, local_rank=0, store=store), "r", {})
    assert info["node_topologies"] == {} and info["hosts"] == ["node0"]
