"""Where this process sits in a job of several nodes: torchrun's variables, or Slurm's turned into them.

    srun --nodes 2 --ntasks-per-node 1 python -m fabricbench sweep --engine torch --backend gloo ...
    from fabricbench.cluster import env
    env.from_slurm(os.environ)    # {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": ...}
    env.slurm_nodes(os.environ)   # (nnodes, node_rank, master_addr) for `train`, one task per node
    env.on_slurm(config)          # a train or study config with Slurm's nodes, when it names none

torchrun (and any launcher that follows it) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT; fabricbench reads those. Under srun they are missing and Slurm's are there: SLURM_PROCID
(the rank), SLURM_NTASKS (the world), SLURM_LOCALID (the rank on its node), SLURM_NODEID (the node) and
SLURM_JOB_NODELIST (the nodes, e.g. "gpu[01-04,07]"; its first one hosts rank 0 and so the store).
MASTER_PORT: the one given, else SLURM_PORT_BASE + the job id modulo SLURM_PORT_SPAN, so that two jobs
sharing a node do not meet on one port. FABRICBENCH_NODE_LOCAL=1 makes every task a run of its own node.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Mapping, TypeVar

C = TypeVar("C")  # a config with nnodes, node_rank, master_addr and master_port (TrainConfig, StudyConfig)

SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 20000
# Set to 1 in an srun step whose tasks each run on their own (a per-node qualify of every node at once):
# Slurm's tasks are then not ranks of one job. Without it a step of one task per node is one job across
# the nodes (the sweep's srun recipe), which a per-node command cannot tell apart.
NODE_LOCAL_ENV = "FABRICBENCH_NODE_LOCAL"
BATCH_STEP = 0xFFFFFFF0  # Slurm's batch, extern and interactive steps are numbered from here up


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list -> the hosts, in order: "a[01-03,7],b" -> a01 a02 a03 a7 b."""
    hosts: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?(?:,|$)", text.strip()):
        prefix, ranges = m.group(1), m.group(2)
        if not prefix and not ranges:
            continue
        if ranges is None:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                hosts.append(prefix + lo)
                continue
            width = len(lo)
            for i in range(int(lo), int(hi) + 1):
                hosts.append(f"{prefix}{i:0{width}d}")
    return hosts


def in_srun_step(environ: Mapping[str, str]) -> bool:
    """Inside an srun step (a batch script's own shell has SLURM_PROCID 0 too, but is one process: no)."""
    step = environ.get("SLURM_STEP_ID", "")
    if environ.get(NODE_LOCAL_ENV) == "1":
        return False
    return step.isdigit() and int(step) < BATCH_STEP and \
        all(environ.get(k) for k in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST"))


def _tasks(environ: Mapping[str, str]) -> str:
    return environ.get("SLURM_STEP_NUM_TASKS") or environ["SLURM_NTASKS"]


def from_slurm(environ: Mapping[str, str]) -> dict[str, str]:
    """torchrun's variables derived from Slurm's, for those not set already ({} outside an srun step, or
    when RANK is set: a launcher inside the allocation, such as torchrun, has the say)."""
    if "RANK" in environ or not in_srun_step(environ):
        return {}
    hosts = expand_nodelist(environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"])
    out = {"RANK": environ["SLURM_PROCID"], "WORLD_SIZE": _tasks(environ),
           "LOCAL_RANK": environ.get("SLURM_LOCALID", "0")}
    if not environ.get("MASTER_ADDR") and hosts:
        out["MASTER_ADDR"] = hosts[0]
    if not environ.get("MASTER_PORT"):
        job = int(environ.get("SLURM_JOB_ID") or 0)
        out["MASTER_PORT"] = str(SLURM_PORT_BASE + job % SLURM_PORT_SPAN)
    return out


def slurm_nodes(environ: Mapping[str, str]) -> tuple[int, int, str, int] | None:
    """(nnodes, node_rank, master_addr, master_port) of an srun step with one task per node (train starts
    torchrun for the node's ranks itself); None outside one, or with several tasks per node."""
    if not in_srun_step(environ) or not environ.get("SLURM_NODEID"):
        return None
    hosts = expand_nodelist(environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"])
    if not hosts or int(_tasks(environ)) != len(hosts):
        return None
    port = environ.get("MASTER_PORT") or str(SLURM_PORT_BASE + int(environ.get("SLURM_JOB_ID") or 0) % SLURM_PORT_SPAN)
    return len(hosts), int(environ["SLURM_NODEID"]), environ.get("MASTER_ADDR") or hosts[0], int(port)


def on_slurm(config: C, environ: Mapping[str, str] | None = None) -> C:
    """`config` with Slurm's nodes (nnodes, node_rank, master_addr, master_port) in an srun step of one
    task per node, when the config names one node (nnodes 1, its default); else `config` as it is. The
    library's rule, so fabricbench.train(...) and fabricbench.study(...) see Slurm as the CLI does."""
    slurm = slurm_nodes(os.environ if environ is None else environ)
    if slurm is None or getattr(config, "nnodes") != 1:
        return config
    return dataclasses.replace(config, **dict(zip(("nnodes", "node_rank", "master_addr", "master_port"), slurm)))


def launcher_prefix(environ: Mapping[str, str]) -> str | None:
    """How this distributed run was launched, as the start of a command line that runs it again (the
    program's own `-m fabricbench ...` follows); None when this process was not launched as a rank."""
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    world = environ["WORLD_SIZE"]
    if in_srun_step(environ):
        nodes = len(expand_nodelist(environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"]))
        return f"srun --nodes {nodes} --ntasks {world} python -m"
    per_node = environ.get("LOCAL_WORLD_SIZE") or world
    nnodes = environ.get("GROUP_WORLD_SIZE") or str(max(1, int(world) // max(1, int(per_node))))
    where = f"--master-addr {environ.get('MASTER_ADDR', '?')} --master-port {environ.get('MASTER_PORT', '?')}"
    node = " --node-rank NODE" if nnodes != "1" else ""
    return f"python -m torch.distributed.run --nnodes {nnodes} --nproc-per-node {per_node}{node} {where} -m"


def hosts_in(records) -> list[str]:
    """Every host the records' ranks ran on (collective records name them in extra.hosts), in order."""
    seen: dict[str, None] = {}
    for r in records:
        extra = r.get("extra") if isinstance(r, dict) else None
        for h in (extra or {}).get("hosts") or []:
            seen.setdefault(str(h), None)
    return list(seen)
