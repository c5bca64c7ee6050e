"""How a sweep's ranks meet and what they agree on: the env:// rendezvous of a torchrun- or srun-style
launch (once per process, a store prefix per sweep), rank 0's values shared through the store, and what
rank 0 learns of every rank (GPUs, hosts, and across nodes each other node's topology).

    dist = dist_from_env(timeout_s=60)      # None outside a launch (RANK/WORLD_SIZE unset)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from fabricbench import topology
from fabricbench.errors import CollectiveTimeout, UsageError
from fabricbench.measuring.session import DistContext


_LAUNCH: dict[str, Any] = {}  # this process's env:// rendezvous, made once: {"dist": DistContext, "sweeps": n}


def dist_from_env(timeout_s: float) -> DistContext | None:
    """A DistContext when launched by torchrun/srun-style env:// variables, else None. The rendezvous
    (rank 0 waits for every rank; the others for rank 0) and every store wait after it end at timeout_s.

    One rendezvous per process; each call gets a store prefix of its own (sweep0, sweep1, ...): under
    torchrun the ranks share the agent's store for the whole launch, so a second fabricbench.sweep() in
    the same ranks would otherwise read the first one's run id and communicator id and hang. Every rank
    makes the same calls in the same order, so the numbers agree."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    import datetime

    import torch.distributed as tdist

    if "dist" not in _LAUNCH:
        _LAUNCH.update(dist=_rendezvous(timeout_s), sweeps=0)
    base: DistContext = _LAUNCH["dist"]
    n = _LAUNCH["sweeps"]
    _LAUNCH["sweeps"] = n + 1
    base.store.set_timeout(datetime.timedelta(seconds=timeout_s))
    return dataclasses.replace(base, store=tdist.PrefixStore(f"sweep{n}", base.store), timeout_s=timeout_s)


def _rendezvous(timeout_s: float) -> DistContext:
    import datetime

    import torch.distributed as tdist

    try:
        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ["RANK"])
    except ValueError:
        raise UsageError(f"RANK={os.environ['RANK']!r} WORLD_SIZE={os.environ['WORLD_SIZE']!r}: whole numbers "
                         f"expected (a torchrun-style launch), or unset both") from None
    if not 0 <= rank < world:
        raise UsageError(f"RANK={rank} with WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:
        raise UsageError(f"RANK and WORLD_SIZE are set (a torchrun-style launch) but {' and '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not; set them, launch with torchrun, "
                         f"or unset RANK and WORLD_SIZE")
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    try:
        store, rank, world = next(tdist.rendezvous("env://", rank, world,
                                                   timeout=datetime.timedelta(seconds=timeout_s)))
    except (RuntimeError, ValueError) as e:
        text = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        if rank == 0:
            raise CollectiveTimeout(f"rank 0 of {world}: not every rank joined at {where} within --timeout "
                                    f"{timeout_s:g} s ({text}); start all WORLD_SIZE={world} ranks") from None
        raise CollectiveTimeout(f"rank {rank} of {world}: could not reach rank 0 at {where} within --timeout "
                                f"{timeout_s:g} s ({text})") from None
    store = tdist.PrefixStore("fabricbench", store)
    # the rank on this node picks the GPU: torchrun sets LOCAL_RANK, srun SLURM_LOCALID; the global rank is
    # right only on a single node
    local_env = os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID")
    try:
        local = int(local_env) if local_env else rank
    except ValueError:
        raise UsageError(f"LOCAL_RANK/SLURM_LOCALID={local_env!r}: a whole number expected") from None
    return DistContext(rank=rank, world_size=world, local_rank=local, store=store, timeout_s=timeout_s)


def share(dist: DistContext | None, run_id: str, key: str, value: Any) -> Any:
    """Rank 0's value, on every rank (through the store)."""
    if dist is None or dist.world_size == 1:
        return value
    if dist.rank == 0:
        dist.store.set(f"{run_id}/{key}", json.dumps(value))
        return value
    return json.loads(dist.store.get(f"{run_id}/{key}"))


def all_ranks_info(dist: DistContext | None, run_id: str, info: dict[str, Any]) -> dict[str, Any]:
    """With one rank per process, rank 0 learns every rank's GPUs and host, so records name them all; and
    across nodes, each other node's topology (its first local rank sends the snapshot), under
    "node_topologies" {host: snapshot}, which rank 0 writes as topology records (run_rank)."""
    if dist is None or dist.world_size == 1:
        return info
    import socket

    mine: dict[str, Any] = {"devices": info.get("devices", []), "gpu_names": info.get("gpu_names", []),
                            "host": socket.gethostname()}
    if dist.rank != 0 and dist.local_rank == 0:
        mine["topology"] = topology.snapshot()
    dist.store.set(f"{run_id}/info/{dist.rank}", json.dumps(mine))
    if dist.rank != 0:
        return info
    ranks = [json.loads(dist.store.get(f"{run_id}/info/{r}")) for r in range(dist.world_size)]
    return {**info, "gpus": [d for r in ranks for d in r["devices"]],
            "gpu_names": [n for r in ranks for n in r["gpu_names"]],
            "hosts": sorted({r["host"] for r in ranks}),
            "node_topologies": {r["host"]: r["topology"] for r in ranks
                                if r.get("topology") and r["host"] != mine["host"]}}


def agree(dist: DistContext, run_id: str, seed: int) -> tuple[str, int]:
    """Rank 0's run id and check seed for every rank: the store keys and the --check inputs depend on them."""
    if dist.rank == 0:
        dist.store.set("run", json.dumps([run_id, seed]))
    got = json.loads(dist.store.get("run"))
    return got[0], int(got[1])
