"""Ranks on one node started by the job layer itself (training/launch.py rank_commands), with no torchrun
agent: what the agent did for them that they now do themselves. Rank 0 hosts the store the process group
and the heartbeats (jobs/heartbeat.py) meet at, so it opens it early and leaves last.

    store = one_node.early_store()     # rank 0, right after importing torch (training/worker.py)
    one_node.leave_together()          # every rank, after its heartbeat finished, in a run that succeeded

Under torchrun (nodes that meet) both do nothing: the agent's store outlives the ranks.
"""

from __future__ import annotations

import os
from typing import Any


def early_store() -> Any:
    """On one node (the job layer starts the ranks: no torchrun agent holds the store), rank 0 hosts the
    process group's store as soon as torch is imported, before transformers: a peer that reaches its
    init first would otherwise find no server and back off (0.6 s of init on CPU). The group's own store,
    made later in this process with the same address, shares this server (multi_tenant). None elsewhere."""
    env = os.environ
    world = int(env.get("WORLD_SIZE", 1))
    if env.get("RANK") != "0" or world < 2 or int(env.get("LOCAL_WORLD_SIZE", 0)) != world or \
            env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # under torchrun its agent hosts it
        return None
    from torch.distributed import TCPStore

    try:
        return TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), world, is_master=True, multi_tenant=True,
                        wait_for_workers=False)
    except Exception:  # noqa: BLE001 - e.g. the port taken: the group's own init then says so, in the record
        return None


def leave_together() -> None:
    """On one node no torchrun agent holds the store that the ranks' heartbeats write to: rank 0 does. Were
    rank 0 to leave first, a slower peer's last beat would wait out the heartbeat's store bound (~3 s of
    teardown, seen in 1 run of 5). A barrier after every heartbeat has finished keeps rank 0 until each rank
    is done with the store. A peer that failed never comes to it: the job layer ends the run on that
    rank's exit status, as for any failed rank. Under torchrun (nodes that meet) the agent's store outlives
    the ranks, and nothing waits."""
    import torch

    dist = torch.distributed
    if dist.is_initialized() and dist.get_world_size() > 1 and \
            int(os.environ.get("LOCAL_WORLD_SIZE", 0)) == dist.get_world_size():
        dist.barrier()

