"""fabricbench/cluster/env.py against Slurm's environment as a real job sets it: tests/data/slurm/ holds
`env | grep ^SLURM_` of a batch job of 2 nodes (node[0-1]) with 2 tasks per node, captured on the lab's
Slurm 22.05 (tests/test_slurm_env_capture.py): the batch script's own shell, an srun step of every task
(step-2pn-rankR) and one of 1 task per node (step-1pn-rankR, what train and study take).

    python3 -m pytest -q -n0 tests/test_slurm_env.py
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fabricbench.cluster import env

DATA = Path(__file__).parent / "data" / "slurm"


def read(f: Path) -> dict[str, str]:
    """A captured `env | grep ^SLURM_` file -> {name: value}."""
    return dict(ln.split("=", 1) for ln in f.read_text().splitlines() if "=" in ln)


@dataclass(frozen=True)
class _Config:  # the fields env.on_slurm replaces in a train or study config
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500


def check_all(folder: Path) -> None:
    """Every expectation below, on the captures in `folder` (the committed ones, or a fresh capture)."""
    check_batch_step(read(folder / "batch.env"))
    for rank in range(4):
        check_step_of_every_task(read(folder / f"step-2pn-rank{rank}.env"), rank)
    for rank in range(2):
        check_step_of_one_task_per_node(read(folder / f"step-1pn-rank{rank}.env"), rank)


def check_batch_step(e: dict[str, str]) -> None:
    # The batch script's shell has SLURM_PROCID 0 and SLURM_NTASKS 4 but no step id: one process, no rank.
    assert "SLURM_STEP_ID" not in e and e["SLURM_PROCID"] == "0" and e["SLURM_NTASKS"] == "4"
    assert env.from_slurm(e) == {}
    assert env.slurm_nodes(e) is None
    assert env.on_slurm(_Config(), e) == _Config()


def _port(e: dict[str, str]) -> str:
    return str(env.SLURM_PORT_BASE + int(e["SLURM_JOB_ID"]) % env.SLURM_PORT_SPAN)


def check_step_of_every_task(e: dict[str, str], rank: int) -> None:
    assert e["SLURM_JOB_NODELIST"] == "node[0-1]" and e["SLURM_STEP_NUM_TASKS"] == e["SLURM_NTASKS"] == "4"
    hosts = env.expand_nodelist(e["SLURM_STEP_NODELIST"])
    assert hosts == ["node0", "node1"]
    assert hosts[int(e["SLURM_NODEID"])] == e["SLURM_TOPOLOGY_ADDR"]  # the node this task ran on
    got = env.from_slurm(e)
    assert got == {"RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(rank % 2), "MASTER_ADDR": "node0",
                   "MASTER_PORT": _port(e)}
    assert env.slurm_nodes(e) is None  # 2 tasks per node: not one train per node
    assert env.launcher_prefix({**e, **got}) == "srun --nodes 2 --ntasks 4 python -m"
    # torchrun started inside the step has the say: its RANK wins
    assert env.from_slurm({**e, "RANK": "7", "WORLD_SIZE": "8"}) == {}
    # each task a run of its own node (a per-node qualify): no rank from Slurm
    assert env.from_slurm({**e, env.NODE_LOCAL_ENV: "1"}) == {}


def check_step_of_one_task_per_node(e: dict[str, str], rank: int) -> None:
    assert e["SLURM_STEP_NUM_TASKS"] == e["SLURM_NTASKS"] == "2" and e["SLURM_STEP_TASKS_PER_NODE"] == "1(x2)"
    assert e["SLURM_NODEID"] == str(rank) and e["SLURM_TOPOLOGY_ADDR"] == f"node{rank}"
    assert env.from_slurm(e) == {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "node0",
                                 "MASTER_PORT": _port(e)}
    port = int(_port(e))
    assert env.slurm_nodes(e) == (2, rank, "node0", port)
    assert env.on_slurm(_Config(), e) == _Config(nnodes=2, node_rank=rank, master_addr="node0", master_port=port)
    assert env.on_slurm(_Config(nnodes=3), e) == _Config(nnodes=3)  # a config that names its nodes keeps them
    assert env.slurm_nodes({**e, "MASTER_PORT": "29400"}) == (2, rank, "node0", 29400)
    assert env.slurm_nodes({**e, env.NODE_LOCAL_ENV: "1"}) is None


def test_the_batch_step_is_no_rank():
    check_batch_step(read(DATA / "batch.env"))


def test_an_srun_step_of_every_task_is_one_rank_per_task():
    for rank in range(4):
        check_step_of_every_task(read(DATA / f"step-2pn-rank{rank}.env"), rank)


def test_an_srun_step_of_one_task_per_node_is_one_node_each():
    for rank in range(2):
        check_step_of_one_task_per_node(read(DATA / f"step-1pn-rank{rank}.env"), rank)


def test_the_captures_are_all_there():
    assert sorted(f.name for f in DATA.glob("*.env")) == sorted(
        ["batch.env", *(f"step-2pn-rank{r}.env" for r in range(4)), *(f"step-1pn-rank{r}.env" for r in range(2))])
