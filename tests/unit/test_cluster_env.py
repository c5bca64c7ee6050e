"""Slurm's variables turned into torchrun's (fabricbench/cluster/env.py): the ones a Slurm recipe relies on.

    python3 -m pytest -q tests/unit/test_cluster_env.py
"""

from __future__ import annotations

import pytest

from fabricbench.cluster.env import expand_nodelist, from_slurm, slurm_nodes


@pytest.mark.parametrize("text, hosts", [
    ("node0", ["node0"]),
    ("node[0-1]", ["node0", "node1"]),
    ("gpu[01-03,7],login", ["gpu01", "gpu02", "gpu03", "gpu7", "login"]),
    ("a1,b[09-10]", ["a1", "b09", "b10"]),
])
def test_nodelists_expand_in_order(text, hosts):
    assert expand_nodelist(text) == hosts


SRUN = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123456"}


def test_srun_gives_torchruns_variables():
    assert from_slurm(SRUN) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "gpu07",
                                "MASTER_PORT": str(20000 + 123456 % 20000)}
    assert from_slurm({**SRUN, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) == {
        "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}


def test_torchrun_inside_slurm_and_a_batch_shell_are_left_alone():
    assert from_slurm({**SRUN, "RANK": "0"}) == {}
    assert from_slurm({**SRUN, "SLURM_STEP_ID": str(0xFFFFFFFE)}) == {}  # the batch script's own shell
    assert from_slurm({k: v for k, v in SRUN.items() if k != "SLURM_STEP_ID"}) == {}


def test_train_takes_the_nodes_from_one_task_per_node():
    one_per_node = {**SRUN, "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}
    assert slurm_nodes(one_per_node) == (2, 1, "gpu07", 20000 + 123456 % 20000)
    assert slurm_nodes(SRUN) is None  # 4 tasks on 2 nodes: not train's layout


def test_the_launcher_starts_the_reproduce_line():
    from fabricbench.cluster.env import launcher_prefix

    torchrun = {"RANK": "0", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "GROUP_WORLD_SIZE": "2",
                "MASTER_ADDR": "node0", "MASTER_PORT": "29400"}
    assert launcher_prefix(torchrun) == ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 8 "
                                         "--node-rank NODE --master-addr node0 --master-port 29400 -m")
    assert launcher_prefix({**SRUN, **from_slurm(SRUN)}) == "srun --nodes 2 --ntasks 4 python -m"
    assert launcher_prefix({}) is None


def test_hosts_come_from_the_records_in_order():
    from fabricbench.cluster.env import hosts_in

    recs = [{"kind": "collective", "extra": {"hosts": ["node0", "node1"]}}, {"kind": "x"},
            {"kind": "collective", "extra": {"hosts": ["node0", "node2"]}}]
    assert hosts_in(recs) == ["node0", "node1", "node2"]


def test_the_library_configs_see_slurm_as_the_cli_does(monkeypatch):
    # fabricbench.train(...) and fabricbench.study(...) from Python: the nodes come from Slurm in the library
    from fabricbench.cluster.env import on_slurm
    from fabricbench.studying.config import StudyConfig
    from fabricbench.training import api
    from fabricbench.training.config import TrainConfig

    one_per_node = {**SRUN, "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}
    for k, v in one_per_node.items():
        monkeypatch.setenv(k, v)
    port = 20000 + 123456 % 20000
    cfg = api.placed(TrainConfig(strategies="ddp", model="tiny-mistral", device="cpu"))
    assert (cfg.nnodes, cfg.node_rank, cfg.master_addr, cfg.master_port) == (2, 1, "gpu07", port)
    assert cfg.strategies == ["ddp"]
    study = on_slurm(StudyConfig(out="x", model="tiny-mistral", device="cpu"))
    assert (study.nnodes, study.node_rank, study.master_addr, study.master_port) == (2, 1, "gpu07", port)
    mine = TrainConfig(strategies="ddp", model="tiny-mistral", device="cpu", nnodes=3, master_port=29500)
    assert on_slurm(mine) is mine  # nodes named: Slurm's are not taken
