"""A user choosing GPUs and a strategy: the machine's topology, then the advice for a model on it."""

from __future__ import annotations

import fabricbench


def topology() -> str:
    tp: fabricbench.TopoResult = fabricbench.topo(fabricbench.TopoConfig(topo_file="topo.txt", gpus="0-3",
                                                                         out="topo.jsonl"))
    print(tp.topology.islands(), tp.advice)
    return tp.summary


def advice() -> tuple[list[int], str | None]:
    a: fabricbench.Advice = fabricbench.advise(fabricbench.AdviseConfig(model="mistral-7b", num_gpus=4,
                                                                        topo_file="topo.txt", gpu_memory="80GB"))
    for s in a.strategies:
        print(s.strategy, s.rank, s.note)
    print(a.reasons, a.runner_up)
    return a.placement, a.strategy


if __name__ == "__main__":
    print(topology(), advice())
