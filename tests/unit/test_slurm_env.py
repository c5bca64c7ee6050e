"""fabricbench/cluster/env.py against Slurm's environment as a real job sets it: tests/data/slurm/ holds
`env | grep ^SLURM_` of a batch job of 2 nodes (node[0-1]) with 2 tasks per node, captured on the lab's
Slurm 22.05 (tests/e2e/test_slurm_env_capture.py): the batch script's own shell, an srun step of every task
(step-2pn-rankR), one of 1 task per node (step-1pn-rankR, what train and study take) and one of
--gpus-per-task 1 (step-gpt-rankR; the lab's GPUs are Slurm's gres on stand-in device files, so each task's
CUDA_VISIBLE_DEVICES is the one Slurm binds).

    python3 -m pytest -q -n0 tests/unit/test_slurm_env.py
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fabricbench.cluster import env
from fabricbench.measuring.session import DistContext
import roots

DATA = roots.DATA / "slurm"


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
    check_gpus_of_the_node_tasks([read(folder / f"step-2pn-rank{r}.env") for r in range(4)], per_task=False)
    check_gpus_of_the_node_tasks([read(folder / f"step-gpt-rank{r}.env") for r in range(4)], per_task=True)


def check_gpus_of_the_node_tasks(steps: list[dict[str, str]], *, per_task: bool) -> None:
    """Each task drives a GPU it can see, and no two tasks of a node drive the same one: with the node's
    GPUs visible to all (CUDA_VISIBLE_DEVICES=0,1) and with --gpus-per-task 1 (each task its own alone)."""
    taken: dict[str, set[str]] = {}
    for e in steps:
        visible = e["CUDA_VISIBLE_DEVICES"].split(",")
        assert len(visible) == (1 if per_task else 2), e["CUDA_VISIBLE_DEVICES"]
        got = env.from_slurm(e)
        dist = DistContext(rank=int(got["RANK"]), world_size=int(got["WORLD_SIZE"]),
                           local_rank=int(got["LOCAL_RANK"]), store=None)
        index = dist.gpu(list(range(len(visible))))  # the engines' rule, over the GPUs this task sees
        physical = visible[index]
        node = e["SLURM_TOPOLOGY_ADDR"]
        assert physical not in taken.setdefault(node, set()), (node, physical)
        taken[node].add(physical)
    assert taken == {"node0": {"0", "1"}, "node1": {"0", "1"}}


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


def test_each_task_drives_its_own_gpu_with_and_without_gpus_per_task():
    check_gpus_of_the_node_tasks([read(DATA / f"step-2pn-rank{r}.env") for r in range(4)], per_task=False)
    check_gpus_of_the_node_tasks([read(DATA / f"step-gpt-rank{r}.env") for r in range(4)], per_task=True)


def test_the_captures_are_all_there():
    assert sorted(f.name for f in DATA.glob("*.env")) == sorted(
        ["batch.env", *(f"step-2pn-rank{r}.env" for r in range(4)), *(f"step-1pn-rank{r}.env" for r in range(2)),
         *(f"step-gpt-rank{r}.env" for r in range(4))])
