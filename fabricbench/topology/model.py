"""The GPU topology model: per GPU facts, the link between every pair, NVLink islands, placement.

    fabricbench topo --json          (this model, read from NVML or `nvidia-smi topo -m`)

A link is the string `nvidia-smi topo -m` prints (links.py: "X", "NV<n>", PIX ... SYS, and the limits a
file must keep: NV1-NV36, GPU indices 0-4095). An NVLink island is a maximal set of GPUs
joined pairwise by NVLink (a clique): one island on NVSwitch boards, two quads on H200 NVL machines,
single GPUs on PCIe-only boxes. A collective runs at the speed of its slowest required hop, so a job
that spans islands runs at the PCIe/SYS speed between them.

Every analysis here takes polynomial time, so an NVL72 rack or a 576-GPU domain answers in well under a
second (benchmarks/topology/scaling.py): links are turned once into integer ranks and bit sets, islands
are the connected components when those are cliques (every real board), exact maximal cliques for a small
irregular component, and one greedily grown maximal clique per uncovered GPU for a large irregular one
(enumerating all maximal cliques is exponential: cliques.py). best_set is exhaustive only while that is cheap.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.topology.cliques import (
    bits,
    bron_kerbosch,
    component_seeds,
    components,
    greedy_cliques,
    grow_cliques,
)
from fabricbench.topology.links import (
    MAX_NVLINKS,
    PCIE_RELATIONS,
    link_rank,
    normalize_link,
    nvlink_count,
)

_EXHAUSTIVE_PAIRS = 60_000  # best_set examines every k-subset while C(n,k) x k^2/2 pair lookups stay below this
_EXACT_CLIQUES = 24  # an irregular NVLink component this small gets all its maximal cliques (Bron-Kerbosch)


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """One GPU as NVML or nvidia-smi describes it; fields a source lacks stay None."""

    index: int  # NVML / nvidia-smi index (PCI order)
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None  # e.g. "00000000:18:00.0"
    pcie_gen: int | None = None  # current link generation
    pcie_width: int | None = None  # current lanes
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None  # CPU list, e.g. "0-55,112-167"


@dataclass(frozen=True, kw_only=True)
class Nic:
    """A NIC row of `nvidia-smi topo -m`: its name and its PCIe relation to each GPU (in gpu order)."""

    label: str  # "NIC0"
    device: str | None = None  # "mlx5_0", from the NIC Legend
    links: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Topology:
    gpus: tuple[Gpu, ...]
    links: tuple[tuple[str, ...], ...]  # links[i][j] between gpus[i] and gpus[j]; "X" on the diagonal
    nics: tuple[Nic, ...] = ()
    source: str = "nvml"  # "nvml", "nvidia-smi" or "file:<path>"

    def __post_init__(self) -> None:
        # Topologies come from files (topo --topo-file, --topo-file, a results file's snapshot): a
        # damaged one is the user's input, said in one line, never an assertion deep in an analysis.
        n = len(self.gpus)
        if len(self.links) != n or any(len(r) != n for r in self.links):
            raise UsageError(f"topology: the link table must be {n} x {n} for {n} GPU(s)")
        if len({g.index for g in self.gpus}) != n:
            raise UsageError("topology: two GPUs have the same index")
        for p, row in enumerate(self.links):
            if row[p] != "X" or row.count("X") != 1:
                raise UsageError(f"topology: row {p} of the link table must have X on the diagonal only")
        bad = {lk for row in self.links for lk in row} - {"X"}
        bad = {lk for lk in bad if not isinstance(lk, str) or normalize_link(lk) != lk}
        if bad:
            raise UsageError(f"topology: unknown link {sorted(map(str, bad))[0][:20]!r}; links are NV1 to "
                             f"NV{MAX_NVLINKS} (NVLinks per pair: topology/links.py), "
                             f"{', '.join(PCIE_RELATIONS)} or X")
        if n > MAX_GPUS:
            raise UsageError(f"topology: {n} GPUs is more than the {MAX_GPUS} one table may hold")
        beyond = [g.index for g in self.gpus if not 0 <= g.index < MAX_GPUS]
        if beyond:
            raise UsageError(f"topology: GPU index {beyond[0]} is outside 0-{MAX_GPUS - 1} (topology/links.py)")
        for p, row in enumerate(self.links):
            for q in range(p):
                if row[q] != self.links[q][p]:
                    raise UsageError(f"topology: the link between GPUs {self.gpus[p].index} and "
                                     f"{self.gpus[q].index} differs by direction ({row[q]} / {self.links[q][p]})")

    # -- lookups -------------------------------------------------------------------------------
    @functools.cached_property
    def indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    @functools.cached_property
    def _where(self) -> dict[int, int]:
        return {g.index: p for p, g in enumerate(self.gpus)}

    def _pos(self, index: int) -> int:
        return self._where[index]

    def link(self, a: int, b: int) -> str:
        w = self._where
        return self.links[w[a]][w[b]]

    def nvlinks(self, a: int, b: int) -> int:
        w = self._where
        return self._nv[w[a]][w[b]]

    @functools.cached_property
    def _nv(self) -> list[list[int]]:
        """NVLinks between positions p and q (0 for PCIe and the diagonal)."""
        count = {lk: nvlink_count(lk) for lk in {lk for r in self.links for lk in r}}
        return [[count[lk] for lk in row] for row in self.links]

    @functools.cached_property
    def _rank(self) -> list[list[int]]:
        """The link between positions p and q as an integer, 0 the best link present (diagonal: -1)."""
        num = {lk: i for i, lk in enumerate(self._rank_links)}
        num["X"] = -1  # the diagonal only (__post_init__)
        return [list(map(num.__getitem__, row)) for row in self.links]

    @functools.cached_property
    def _rank_links(self) -> list[str]:
        return sorted({lk for r in self.links for lk in r if lk != "X"}, key=link_rank)

    def _adj(self, max_rank: int | None = None) -> list[int]:
        """Per position, the bit set of positions it reaches by NVLink (max_rank None) or by a link of
        rank <= max_rank (the diagonal excluded)."""
        if max_rank is None:
            rows = [["1" if c > 0 else "0" for c in row] for row in self._nv]
        else:
            rows = [["1" if 0 <= c <= max_rank else "0" for c in row] for row in self._rank]
        return [int("".join(reversed(r)), 2) if r else 0 for r in rows]

    def subset(self, indices: tuple[int, ...] | list[int]) -> "Topology":
        """The topology restricted to these GPU indices (in the order given)."""
        missing = [i for i in indices if i not in self._where]
        if missing:
            raise UsageError(f"--gpus names GPU {', '.join(map(str, missing))} but the topology has "
                             f"{len(self.gpus)} GPU(s) ({ranges(self.indices)})")
        if tuple(indices) == self.indices:
            return self
        pos = [self._pos(i) for i in indices]
        return Topology(gpus=tuple(self.gpus[p] for p in pos),
                        links=tuple(tuple(self.links[p][q] for q in pos) for p in pos),
                        nics=tuple(Nic(label=n.label, device=n.device,
                                       links=tuple(n.links[p] for p in pos) if n.links else ())
                                   for n in self.nics),
                        source=self.source)

    # -- derived facts -------------------------------------------------------------------------
    def has_nvlink(self) -> bool:
        """Whether any pair is joined by NVLink."""
        return any(any(row) for row in self._nv)

    def pairs(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(self.indices, 2))

    def islands(self) -> list[list[int]]:
        """Maximal cliques of the NVLink graph, each sorted, ordered by first GPU (largest first on a tie).

        Exact (all maximal cliques) wherever a component is a clique or has at most _EXACT_CLIQUES GPUs;
        a larger irregular component gets one maximal clique grown from each GPU no clique yet holds.
        """
        return [list(s) for s in self._islands]

    @functools.cached_property
    def _islands(self) -> tuple[tuple[int, ...], ...]:
        idx = self.indices
        adj = self._adj()
        found: list[list[int]] = []
        for comp in components(adj):
            members = bits(comp)
            if all((adj[p] | (1 << p)) & comp == comp for p in members):  # a clique: the island itself
                found.append(members)
            elif len(members) <= _EXACT_CLIQUES:
                found.extend(bron_kerbosch(adj, comp))
            else:
                found.extend(greedy_cliques(adj, comp))
        out = [sorted(idx[p] for p in c) for c in found]
        return tuple(tuple(s) for s in sorted(out, key=lambda s: (s[0], -len(s), s)))

    def island_of(self, gpus: tuple[int, ...] | list[int]) -> list[int] | None:
        """The island holding all of these GPUs, or None when they span islands."""
        want = set(gpus)
        for isl in self._islands:
            if want <= set(isl):
                return list(isl)
        return None

    @functools.cached_property
    def uniform(self) -> bool:
        """Every pair has the same link (NVSwitch boards; also a PCIe box whose GPUs are all SYS apart)."""
        return len(self._rank_links) <= 1

    def worst_link(self, gpus: tuple[int, ...] | list[int]) -> str | None:
        """The slowest hop between any two of these GPUs (what a ring collective over them is held to)."""
        w, rank = self._where, self._rank
        pos = [w[g] for g in gpus]
        worst = max((rank[p][q] for i, p in enumerate(pos) for q in pos[i + 1:]), default=None)
        return None if worst is None else self._rank_links[worst]

    def placement(self, gpus: tuple[int, ...] | list[int]) -> str:
        """'uniform' (every pair of the machine alike), 'intra-island' or 'cross-island'."""
        if self.uniform:
            return "uniform"
        return "intra-island" if self.island_of(gpus) is not None else "cross-island"

    def best_set(self, k: int) -> list[int]:
        """k GPUs whose slowest hop is as fast as possible (then the most NVLinks in total).

        Exhaustive while C(n, k) subsets are cheap to compare (every machine of up to 8 GPUs, and small k
        on larger ones); beyond that, for the best link rank r at which it succeeds, a clique of links
        <= r grown greedily (closest GPU to the set first) from each GPU, the best of those prefixes.
        """
        return self._best(k)[0]

    def _best(self, k: int) -> tuple[list[int], str | None]:
        """best_set(k) and the worst link inside it."""
        n = len(self.gpus)
        assert 1 <= k <= n
        if self.uniform:  # every set alike: the first k, as the exhaustive search would pick
            return list(self.indices[:k]), self.worst_link(self.indices[:2]) if k > 1 else None
        if math.comb(n, k) * k * k <= 2 * _EXHAUSTIVE_PAIRS:
            rank, w = self._rank, self._where

            def key(s: tuple[int, ...]) -> tuple:
                pos = [w[g] for g in s]
                pair = sorted(rank[p][q] for i, p in enumerate(pos) for q in pos[i + 1:])
                return (pair[-1] if pair else -1, pair, s)

            best = min(itertools.combinations(self.indices, k), key=key)
            return list(best), self.worst_link(best)
        for r in range(len(self._rank_links)):
            best = None
            if r not in self._grown_cache:
                self._grown_cache[r] = self._grown(r)
            for order, sums, worst in self._grown_cache[r]:
                if len(order) >= k and (best is None or sums[k - 1] <= best[0]):
                    cand = (sums[k - 1], sorted(order[:k]), worst[k - 1])
                    if best is None or cand < best:
                        best = cand
            if best is not None:
                return best[1], (self._rank_links[best[2]] if best[2] >= 0 else None)
        raise AssertionError("the last link rank joins every pair")

    @functools.cached_property
    def _grown_cache(self) -> dict[int, list[tuple[list[int], list[int], list[int]]]]:
        return {}

    def _grown(self, r: int) -> list[tuple[list[int], list[int], list[int]]]:
        """Cliques of links of rank <= r grown from each GPU (cliques.grow_cliques), by GPU index."""
        n, idx = len(self.gpus), self.indices
        seeds = list(range(n)) if n <= 64 else component_seeds(self._adj(r))
        return [([idx[p] for p in order], sums, worst) for order, sums, worst in grow_cliques(self._rank, r, seeds)]

    def advice(self) -> list[dict[str, Any]]:
        """For each job size k = 2..n: the sets that stay inside one island, or the best one can do."""
        out = []
        isl = [list(s) for s in self._islands]
        prefix_worst: dict[int, list[str | None]] = {}  # island number -> worst link of each prefix
        for k in range(2, len(self.gpus) + 1):
            fitting = [s for s in isl if len(s) >= k]
            if fitting:
                sets = [s[:k] for s in fitting]
                if self.uniform:
                    text = f"any {k} GPUs: every pair is {self.link(*self.indices[:2])}"
                else:
                    first = isl.index(fitting[0])
                    if first not in prefix_worst:
                        prefix_worst[first] = self._prefix_worst(fitting[0])
                    text = " or ".join(f"any {k} of {_list(s)}" for s in fitting) + \
                        f" ({prefix_worst[first][k - 1]} between every pair)"
            else:
                best, worst = self._best(k)
                sets = [best]
                text = (f"no NVLink island holds {k} GPUs: best {_list(best)}, held to {worst} "
                        f"(the slowest hop it needs)")
            out.append({"k": k, "inside_island": bool(fitting), "sets": sets, "islands": fitting,
                        "text": text})
        return out

    def _prefix_worst(self, gpus: list[int]) -> list[str | None]:
        """worst_link of gpus[:1], gpus[:2], ... in one pass."""
        w, rank = self._where, self._rank
        pos = [w[g] for g in gpus]
        out: list[str | None] = []
        worst = -1
        for i, p in enumerate(pos):
            for q in pos[:i]:
                worst = max(worst, rank[p][q])
            out.append(self._rank_links[worst] if worst >= 0 else None)
        return out

    def summary(self) -> str:
        """One line: '8 GPUs, 1 NVLink island ([0-7], NV18), uniform'."""
        isl = self.islands()
        parts = ", ".join(f"[{ranges(s)}]" for s in isl)
        nv = [lk for lk in self._rank_links if nvlink_count(lk)]
        kind = "uniform" if self.uniform else "not uniform"
        links = f", {'/'.join(nv)} inside" if nv else ", no NVLink"
        return (f"{len(self.gpus)} GPU(s), {len(isl)} NVLink island(s) ({parts}){links}, {kind}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": [{k: v for k, v in g.__dict__.items()} for g in self.gpus],
            "links": [list(r) for r in self.links],
            "islands": self.islands(),
            "uniform": self.uniform,
            "nics": [{"label": n.label, "device": n.device, "links": list(n.links)} for n in self.nics],
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: Any) -> "Topology":
        """Rebuild from to_dict() output (`fabricbench topo --json`, a results file's topology record).

        The document may come from anywhere: anything that is not one gives a UsageError naming the field.
        """
        if not isinstance(d, dict):
            raise UsageError("topology: expected a JSON object with \"gpus\" and \"links\"")
        raw_gpus, raw_links = d.get("gpus"), d.get("links")
        if not isinstance(raw_gpus, list) or not raw_gpus or not isinstance(raw_links, list):
            raise UsageError("topology: \"gpus\" must be a non-empty list and \"links\" a list of rows")
        if len(raw_gpus) > MAX_GPUS:
            raise UsageError(f"topology: {len(raw_gpus)} GPUs is more than the {MAX_GPUS} this reads")
        gpus = tuple(_gpu_of(g, i) for i, g in enumerate(raw_gpus))
        if not all(isinstance(r, list) and all(isinstance(c, str) for c in r) for r in raw_links):
            raise UsageError("topology: \"links\" must be rows of link strings (X, NV#, PIX ... SYS)")
        raw_nics = d.get("nics") or []
        if not isinstance(raw_nics, list) or not all(
                isinstance(n, dict) and isinstance(n.get("label"), str) and isinstance(n.get("links", []), list)
                and all(isinstance(c, str) for c in n.get("links", [])) for n in raw_nics):
            raise UsageError("topology: \"nics\" must be a list of {label, device, links}")
        source = d.get("source")
        return cls(gpus=gpus, links=tuple(tuple(r) for r in raw_links),
                   nics=tuple(Nic(label=n["label"], device=n.get("device") if isinstance(n.get("device"), str)
                                  else None, links=tuple(n.get("links", ()))) for n in raw_nics),
                   source=source if isinstance(source, str) else "record")


MAX_GPUS = 4096  # GPUs in one table, and indices below it: a 4096^2 table is ~16M cells (topology/links.py)
_GPU_FIELDS = {"name": str, "uuid": str, "bus_id": str, "pcie_gen": int, "pcie_width": int, "pcie_gen_max": int,
               "pcie_width_max": int, "numa_node": int, "cpu_affinity": str}


def _gpu_of(g: Any, pos: int) -> Gpu:
    """A Gpu from a document's entry: an index, or an object with "index" and known facts (others ignored)."""
    if isinstance(g, dict):
        index = g.get("index")
        facts = {k: v for k, v in g.items() if k in _GPU_FIELDS and isinstance(v, _GPU_FIELDS[k])
                 and not isinstance(v, bool)}
    else:
        index, facts = g, {}
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_GPUS:
        raise UsageError(f"topology: GPU {pos} has index {str(index)[:20]!r}; give a whole number from 0 to "
                         f"{MAX_GPUS - 1}")
    return Gpu(index=index, **facts)


def _list(s: list[int]) -> str:
    return "[" + ",".join(map(str, s)) + "]"


def ranges(indices: tuple[int, ...] | list[int]) -> str:
    """(0,1,2,3,6) -> '0-3,6'."""
    out, run = [], []
    for i in indices:
        if run and i == run[-1] + 1:
            run.append(i)
        else:
            if run:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
