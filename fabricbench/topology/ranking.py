"""GPU sets of size N ranked by the all-reduce busbw they will see.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file tests/data/topo/h200_nvl_two_quads.txt

Measured first: all_reduce records (a study's sweeps, `fabricbench scaling`) give the busbw of the sets
they ran on, at their largest size; a set never measured takes the figure of a measured set of the same
shape (same count and, for NVLink cliques, the same NVLinks per GPU inside the set, else the same slowest
hop), said so. Otherwise the figure
comes from link types alone, NOMINAL below, and the ranking says so: what matters there is the order.

Link-type rule (a collective is as fast as its slowest required hop, docs/domain.md):
- a set whose GPUs are pairwise NVLinked: each GPU reaches the others over the NVLinks it has inside the
  set, capped at NVLINKS_PER_GPU (18 on H100/H200: NVSwitch boards print NV18 for every pair but a GPU
  has 18 links in all); busbw ≈ RING_EFFICIENCY × links × NVLINK_GBPS. A pair inside an NVL quad: 6 links
  → 120 GB/s; the whole quad: 18 → 360; NVSwitch: 18 → 360 (published 8×H200 NVLS-off: ~367).
- any other set: the nominal figure of its slowest PCIe relation (PIX best ... SYS worst).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.topology.links import PCIE_RELATIONS, link_rank, nvlink_count
from fabricbench.topology.model import Topology

NVLINK_GBPS = 25.0  # NVLink 4, per link per direction
NVLINKS_PER_GPU = 18  # H100/H200
RING_EFFICIENCY = 0.8  # ring collectives reach ~80% of the link rate (docs/domain.md)
# nominal ring busbw (GB/s) over PCIe relations: Gen5 x16 ≈ 55 GB/s achieved host<->device, less as
# the path crosses more bridges and the CPU interconnect. For ranking, not for quoting.
NOMINAL_PCIE_GBPS = {"PIX": 48.0, "PXB": 45.0, "PHB": 42.0, "NODE": 40.0, "SYS": 36.0}
MAX_CANDIDATES = 5000  # sets examined exhaustively; beyond it, islands and best sets only
MAX_CANDIDATE_PAIRS = 200_000  # ... and only while C(pool, n) x n^2/2 pair lookups stay below this


@dataclass(kw_only=True)
class PlacementRank:
    gpus: list[int]
    label: str  # "uniform", "intra-island", "cross-island", "cpu ranks"
    slowest_link: str | None
    nvlinks_per_gpu: int  # the fewest NVLinks any GPU of the set has to the others (capped)
    busbw_gbps: float | None
    source: str  # "measured", "measured on [..]" or "link types (nominal)"
    equivalent: list[list[int]] = field(default_factory=list)  # other sets of the same shape and figure

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "label": self.label, "slowest_link": self.slowest_link,
                "nvlinks_per_gpu": self.nvlinks_per_gpu, "busbw_gbps": self.busbw_gbps, "source": self.source,
                "equivalent": self.equivalent}


def _inside(topo: Topology, gpus: tuple[int, ...]) -> list[int] | None:
    """NVLinks each GPU has to the others of the set, or None when some pair has none (not a clique)."""
    nv = topo._nv
    pos = [topo._pos(g) for g in gpus]
    out = []
    for p in pos:
        row = nv[p]
        counts = [row[q] for q in pos if q != p]
        if not all(counts):
            return None
        out.append(sum(counts))
    return out


def links_per_gpu(topo: Topology, gpus: tuple[int, ...]) -> int:
    inside = _inside(topo, gpus) if len(gpus) >= 2 else None
    if not inside:
        return 0
    return min(min(NVLINKS_PER_GPU, x) for x in inside)


def nominal_busbw(topo: Topology, gpus: tuple[int, ...]) -> float | None:
    if len(gpus) < 2:
        return None
    n = links_per_gpu(topo, gpus)
    if n:
        return RING_EFFICIENCY * n * NVLINK_GBPS
    worst = topo.worst_link(list(gpus))
    if worst is None:
        return None
    if nvlink_count(worst):  # cannot happen (not a clique means some pair has no NVLink); kept explicit
        return RING_EFFICIENCY * nvlink_count(worst) * NVLINK_GBPS
    return NOMINAL_PCIE_GBPS.get(worst, NOMINAL_PCIE_GBPS["SYS"])


def shape(topo: Topology, gpus: tuple[int, ...]) -> tuple:
    """What decides a set's busbw by the rule above: for an NVLink clique the count and the NVLinks per
    GPU inside it; for any other set the count and its slowest hop (the ring is held to it)."""
    inside = _inside(topo, gpus) if len(gpus) > 1 else None
    if inside:
        return (len(gpus), "nvlink", tuple(sorted(inside)))
    return (len(gpus), "held to", topo.worst_link(list(gpus)))


def candidates(topo: Topology, pool: list[int], n: int) -> list[tuple[int, ...]]:
    if math.comb(len(pool), n) <= MAX_CANDIDATES and math.comb(len(pool), n) * n * n <= 2 * MAX_CANDIDATE_PAIRS:
        return list(itertools.combinations(sorted(pool), n))
    sub = topo.subset(pool)
    out = {tuple(sorted(isl[:n])) for isl in sub.islands() if len(isl) >= n}
    out.add(tuple(sorted(sub.best_set(n))))
    return sorted(out)


def measured_busbw(results: Iterable[CollectiveResult], fabric: str = "default") -> dict[tuple[int, ...], float]:
    """GPU set -> busbw (GB/s) of its all_reduce at the largest size measured on `fabric`."""
    best: dict[tuple[int, ...], tuple[int, float]] = {}
    for r in results:
        if r.op != "all_reduce" or r.status != Status.OK or r.fabric != fabric:
            continue
        if (r.nranks or 0) < 2 or r.busbw_gbps is None:
            continue
        extra = r.extra or {}
        gpus = extra.get("topology_gpus") or extra.get("placement_gpus") or r.gpus
        if not gpus or None in gpus or len(set(gpus)) != r.nranks:  # a list of numbers may hold nulls
            continue
        key = tuple(sorted(gpus))
        size = r.bytes or 0
        if key not in best or size > best[key][0] or (size == best[key][0] and r.busbw_gbps > best[key][1]):
            best[key] = (size, r.busbw_gbps)
    return {k: v[1] for k, v in best.items()}


def rank_placements(topo: Topology, pool: list[int], n: int,
                    collectives: Iterable[CollectiveResult] = (), fabric: str = "default") -> list[PlacementRank]:
    """Every candidate set of n GPUs from pool, best first; equal sets folded into `equivalent`. Measured
    busbw comes from `collectives` (results/records.py's typed collective records)."""
    measured = measured_busbw(collectives, fabric)
    by_shape = {}
    known = set(topo.indices)
    for k, v in measured.items():
        if all(g in known for g in k):
            by_shape.setdefault(shape(topo, k), (k, v))
    ranked: list[PlacementRank] = []
    for gs in candidates(topo, pool, n):
        form = shape(topo, gs) if by_shape else None
        if n == 1:
            bw, src = None, "one GPU: no collective"
        elif gs in measured:
            bw, src = measured[gs], "measured"
        elif form in by_shape:
            k, bw = by_shape[form]
            src = f"measured on [{','.join(map(str, k))}] (same links)"
        else:
            bw, src = nominal_busbw(topo, gs), "link types (nominal)"
        ranked.append(PlacementRank(gpus=list(gs), label=topo.placement(gs) if n > 1 else "single GPU",
                                    slowest_link=topo.worst_link(list(gs)), nvlinks_per_gpu=links_per_gpu(topo, gs),
                                    busbw_gbps=bw, source=src))
    ranked.sort(key=lambda p: (-(p.busbw_gbps or 0.0), link_rank(p.slowest_link or "X"), p.gpus))
    folded: list[PlacementRank] = []
    for p in ranked:
        same = next((q for q in folded if q.busbw_gbps == p.busbw_gbps and q.slowest_link == p.slowest_link
                     and q.nvlinks_per_gpu == p.nvlinks_per_gpu and q.label == p.label), None)
        if same is not None:
            same.equivalent.append(p.gpus)
        else:
            folded.append(p)
    return folded


__all__ = ["PlacementRank", "rank_placements", "nominal_busbw", "measured_busbw", "PCIE_RELATIONS"]
