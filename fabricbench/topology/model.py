"""The GPU topology model: per GPU facts, the link between every pair, NVLink islands, placement.

    fabricbench topo --json          (this model, read from NVML or `nvidia-smi topo -m`)

A link is the string `nvidia-smi topo -m` prints: "X" (self), "NV<n>" (n bonded NVLinks), or the PCIe
relation PIX < PXB < PHB < NODE < SYS (fewest to most hops). An NVLink island is a maximal set of GPUs
joined pairwise by NVLink (a clique): one island on NVSwitch boards, two quads on H200 NVL machines,
single GPUs on PCIe-only boxes. A collective runs at the speed of its slowest required hop, so a job
that spans islands runs at the PCIe/SYS speed between them.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

# PCIe relations, nearest first (nvidia-smi's legend); "SOC" is the old name of SYS.
PCIE_RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
_NV = re.compile(r"^NV(\d+)$")
_EXHAUSTIVE_LIMIT = 20000  # candidate sets examined exactly; beyond it best_set is greedy


def nvlink_count(link: str) -> int:
    """Bonded NVLinks in a link string ("NV18" -> 18, "SYS" -> 0)."""
    m = _NV.match(link)
    return int(m.group(1)) if m else 0


def normalize_link(token: str) -> str | None:
    """A topo -m cell as a link string, or None when it is not one."""
    t = token.strip().upper()
    if t == "SOC":
        return "SYS"
    if t == "X" or t in PCIE_RELATIONS or _NV.match(t):
        return t
    return None


def link_rank(link: str) -> tuple[int, int]:
    """Sort key, best link first: more NVLinks beat fewer, any NVLink beats PCIe, PIX beats SYS."""
    n = nvlink_count(link)
    if n:
        return (0, -n)
    if link in PCIE_RELATIONS:
        return (1, PCIE_RELATIONS.index(link))
    return (2, 0)  # unknown: worst


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
        n = len(self.gpus)
        assert len(self.links) == n and all(len(r) == n for r in self.links), "links must be n x n"

    # -- lookups -------------------------------------------------------------------------------
    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    def _pos(self, index: int) -> int:
        return self.indices.index(index)

    def link(self, a: int, b: int) -> str:
        return self.links[self._pos(a)][self._pos(b)]

    def nvlinks(self, a: int, b: int) -> int:
        return nvlink_count(self.link(a, b))

    def subset(self, indices: tuple[int, ...] | list[int]) -> "Topology":
        """The topology restricted to these GPU indices (in the order given)."""
        missing = [i for i in indices if i not in self.indices]
        if missing:
            from fabricbench.errors import UsageError

            raise UsageError(f"--gpus names GPU {', '.join(map(str, missing))} but the topology has "
                             f"{len(self.gpus)} GPU(s) ({_ranges(self.indices)})")
        pos = [self._pos(i) for i in indices]
        return Topology(gpus=tuple(self.gpus[p] for p in pos),
                        links=tuple(tuple(self.links[p][q] for q in pos) for p in pos),
                        nics=tuple(Nic(label=n.label, device=n.device,
                                       links=tuple(n.links[p] for p in pos) if n.links else ())
                                   for n in self.nics),
                        source=self.source)

    # -- derived facts -------------------------------------------------------------------------
    def pairs(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(self.indices, 2))

    def islands(self) -> list[list[int]]:
        """Maximal cliques of the NVLink graph (Bron-Kerbosch), each sorted, ordered by first GPU."""
        idx = self.indices
        adj = {a: {b for b in idx if b != a and self.nvlinks(a, b) > 0} for a in idx}
        found: list[list[int]] = []

        def grow(r: set[int], p: set[int], x: set[int]) -> None:
            if not p and not x:
                found.append(sorted(r))
                return
            pivot = max(p | x, key=lambda v: len(adj[v] & p))
            for v in sorted(p - adj[pivot]):
                grow(r | {v}, p & adj[v], x & adj[v])
                p = p - {v}
                x = x | {v}

        grow(set(), set(idx), set())
        return sorted(found, key=lambda s: (s[0], -len(s)))

    def island_of(self, gpus: tuple[int, ...] | list[int]) -> list[int] | None:
        """The island holding all of these GPUs, or None when they span islands."""
        want = set(gpus)
        for isl in self.islands():
            if want <= set(isl):
                return isl
        return None

    @property
    def uniform(self) -> bool:
        """Every pair has the same link (NVSwitch boards; also a PCIe box whose GPUs are all SYS apart)."""
        return len({self.link(a, b) for a, b in self.pairs()}) <= 1

    def worst_link(self, gpus: tuple[int, ...] | list[int]) -> str | None:
        """The slowest hop between any two of these GPUs (what a ring collective over them is held to)."""
        links = [self.link(a, b) for a, b in itertools.combinations(gpus, 2)]
        return max(links, key=link_rank) if links else None

    def placement(self, gpus: tuple[int, ...] | list[int]) -> str:
        """'uniform' (every pair of the machine alike), 'intra-island' or 'cross-island'."""
        if self.uniform:
            return "uniform"
        return "intra-island" if self.island_of(gpus) is not None else "cross-island"

    def best_set(self, k: int) -> list[int]:
        """k GPUs whose slowest hop is as fast as possible (then the most NVLinks in total)."""
        assert 1 <= k <= len(self.gpus)

        def key(s: tuple[int, ...]) -> tuple:
            pair_links = [self.link(a, b) for a, b in itertools.combinations(s, 2)]
            worst = max((link_rank(lk) for lk in pair_links), default=(0, 0))
            return (worst, sorted(link_rank(lk) for lk in pair_links), s)

        if _comb(len(self.gpus), k) <= _EXHAUSTIVE_LIMIT:
            return list(min(itertools.combinations(self.indices, k), key=key))
        chosen = [self.indices[0]]  # greedy: add the GPU whose worst link to the set is best
        while len(chosen) < k:
            rest = [g for g in self.indices if g not in chosen]
            chosen.append(min(rest, key=lambda g: (max(link_rank(self.link(g, c)) for c in chosen), g)))
        return sorted(chosen)

    def advice(self) -> list[dict[str, Any]]:
        """For each job size k = 2..n: the sets that stay inside one island, or the best one can do."""
        out = []
        isl = self.islands()
        for k in range(2, len(self.gpus) + 1):
            fitting = [s for s in isl if len(s) >= k]
            if fitting:
                sets = [s[:k] for s in fitting]
                if self.uniform:
                    text = f"any {k} GPUs: every pair is {self.link(*self.indices[:2])}"
                else:
                    text = " or ".join(f"any {k} of {_list(s)}" for s in fitting) + \
                        f" ({self.worst_link(fitting[0][:k])} between every pair)"
            else:
                best = self.best_set(k)
                sets = [best]
                worst = self.worst_link(best)
                text = (f"no NVLink island holds {k} GPUs: best {_list(best)}, held to {worst} "
                        f"(the slowest hop it needs)")
            out.append({"k": k, "inside_island": bool(fitting), "sets": sets, "islands": fitting,
                        "text": text})
        return out

    def summary(self) -> str:
        """One line: '8 GPUs, 1 NVLink island ([0-7], NV18), uniform'."""
        isl = self.islands()
        parts = ", ".join(f"[{_ranges(s)}]" for s in isl)
        nv = sorted({self.link(a, b) for a, b in self.pairs() if self.nvlinks(a, b)}, key=link_rank)
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
    def from_dict(cls, d: dict[str, Any]) -> "Topology":
        """Rebuild from to_dict() output (e.g. a topology record of a results file)."""
        gpus = tuple(Gpu(**g) if isinstance(g, dict) else Gpu(index=int(g)) for g in d["gpus"])
        return cls(gpus=gpus, links=tuple(tuple(r) for r in d["links"]),
                   nics=tuple(Nic(label=n["label"], device=n.get("device"), links=tuple(n.get("links", ())))
                              for n in d.get("nics", ())),
                   source=d.get("source", "record"))


def _comb(n: int, k: int) -> int:
    import math

    return math.comb(n, k)


def _list(s: list[int]) -> str:
    return "[" + ",".join(map(str, s)) + "]"


def _ranges(indices: tuple[int, ...] | list[int]) -> str:
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
