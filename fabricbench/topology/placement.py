"""Which GPU sets a scaling study runs: for each count, one set inside an island and one across islands.

    fabricbench scaling --gpus 0-7 --num-gpus 2,4,8

On NVSwitch every set is alike ("uniform": one set per count). On an NVL machine with two quads a pair
inside a quad (NV6: a third of each GPU's 18 links), the full quad (all 18), and sets across quads (held
to the PCIe/SYS hop between them) are all run, so the study's three findings come out of one command.
On a PCIe-only box every GPU is its own island: the closest set per count is run ("cross-island").
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricbench.topology.model import Topology


@dataclass(frozen=True, kw_only=True)
class Placement:
    count: int
    gpus: tuple[int, ...]  # NVML indices
    label: str  # "uniform", "intra-island" or "cross-island"
    worst_link: str | None  # the slowest hop inside the set (what a ring over it is held to)


def scaling_sets(topo: Topology, counts: list[int], gpus: tuple[int, ...] | None = None) -> list[Placement]:
    """Sets per count, drawn from `gpus` (default all) of the machine's topology `topo`."""
    pool = list(gpus) if gpus is not None else list(topo.indices)
    sub = topo.subset(pool)
    islands = sub.islands()
    out: list[Placement] = []
    for k in counts:
        assert 2 <= k <= len(pool), k
        if topo.uniform:
            out.append(_make(topo, k, pool[:k]))
            continue
        if not sub.has_nvlink():  # PCIe only: the closest k GPUs
            out.append(_make(topo, k, sub.best_set(k)))
            continue
        inside = next((isl for isl in islands if len(isl) >= k), None)
        if inside is not None:
            out.append(_make(topo, k, inside[:k]))
        across = _spread(islands, k)
        if across is not None:
            out.append(_make(topo, k, across))
        elif inside is None:  # cannot happen with k <= len(pool); kept for a clear failure
            raise AssertionError(f"no set of {k} GPUs in {pool}")
    for p in out:
        assert p.label == topo.placement(p.gpus) or topo.uniform, p
    return out


def _make(topo: Topology, k: int, gpus) -> Placement:
    gs = tuple(sorted(gpus))
    return Placement(count=k, gpus=gs, label=topo.placement(gs), worst_link=topo.worst_link(gs))


def _spread(islands: list[list[int]], k: int) -> list[int] | None:
    """k GPUs spread as evenly as possible over as few islands as make them cross (>= 2).

    A pair takes the first GPU of two islands ([0,4] on two quads); four take two from each ([0,1,4,5]).
    Overlapping islands (cliques that share GPUs) are walked in order, each GPU taken once.
    """
    disjoint: list[list[int]] = []
    for isl in islands:
        rest = [g for g in isl if not any(g in d for d in disjoint)]
        if rest:
            disjoint.append(rest)
    if len(disjoint) < 2:
        return None
    for spread in range(2, len(disjoint) + 1):  # fewest islands that still hold k GPUs
        use = disjoint[:spread]
        if sum(len(d) for d in use) < k:
            continue
        chosen: list[int] = []
        depth = 0
        while len(chosen) < k:
            for d in use:
                if depth < len(d) and len(chosen) < k:
                    chosen.append(d[depth])
            depth += 1
        return chosen
    return None
