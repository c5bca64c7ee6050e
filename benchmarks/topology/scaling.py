"""How long topology analysis takes as the GPU count grows (the target: each case within 1 s).

    python3 benchmarks/topology/scaling.py [--max-seconds 1.0] [--out benchmarks/topology/results/cpu-vm/topology_scaling.txt]

For each synthetic machine it times, in one process: the NVLink islands, `fabricbench topo`'s placement
advice (every job size k = 2..n), the scaling sets of `fabricbench scaling`, `fabricbench.advise`'s
placement ranking for a job of n/2 GPUs, and (t_api) `fabricbench topo --json`'s summary and document plus
the whole `fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=n/2))` call on a fresh copy of the
topology (nothing cached). The total is what one command at that size would pay at most. The shapes:
- uniform: every pair NV18 (an NVSwitch board; NVL72 and NVL576 as one NVLink domain);
- trays: NV18 cliques of 4, SYS between them (NVL72 built as 18 trays of 4 without the switch);
- islands8: NV18 cliques of 8 joined by SYS (several 8-GPU boards seen as one machine);
- irregular: a seeded random NVLink graph (each pair NV2 with probability 1/2, else SYS), no structure;
- pcie: no NVLink at all, PIX/NODE/SYS by socket.
Exit status 1 when any one of those takes longer than --max-seconds.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time

import fabricbench
from fabricbench.topology.ranking import rank_placements
from fabricbench.topology.model import Gpu, Topology
from fabricbench.topology.placement import scaling_sets


def build(n: int, link) -> Topology:
    links = tuple(tuple("X" if i == j else link(min(i, j), max(i, j)) for j in range(n)) for i in range(n))
    return Topology(gpus=tuple(Gpu(index=i) for i in range(n)), links=links, source="synthetic")


def uniform(n: int) -> Topology:
    return build(n, lambda i, j: "NV18")


def cliques(n: int, size: int) -> Topology:
    return build(n, lambda i, j: "NV18" if i // size == j // size else "SYS")


def irregular(n: int, seed: int = 20) -> Topology:
    rng = random.Random(seed * 1000 + n)
    table = {(i, j): ("NV2" if rng.random() < 0.5 else "SYS") for i in range(n) for j in range(i + 1, n)}
    return build(n, lambda i, j: table[(i, j)])


def pcie(n: int) -> Topology:
    return build(n, lambda i, j: "PIX" if i // 2 == j // 2 else "NODE" if i // (n // 2 or 1) == j // (n // 2 or 1)
                 else "SYS")


CASES = [
    ("uniform", [8, 16, 32, 72, 144, 288, 576], uniform),
    ("trays", [8, 16, 32, 72, 144, 288, 576], lambda n: cliques(n, 4)),
    ("islands8", [16, 32, 64, 128, 256, 576], lambda n: cliques(n, 8)),
    ("irregular", [8, 16, 24, 32, 45, 64, 72, 128], irregular),
    ("pcie", [8, 16, 32, 72, 144], pcie),
]


def fresh(topo: Topology) -> Topology:
    """A copy with nothing cached, as a new process would read it."""
    return Topology(gpus=topo.gpus, links=topo.links, source=topo.source)


def time_case(topo: Topology) -> dict[str, float]:
    """Seconds of each command's topology work, each on a fresh copy (what one command pays)."""
    n = len(topo.gpus)
    out = {}
    t = fresh(topo)
    t0 = time.perf_counter()
    out["n_islands"] = len(t.islands())
    out["islands"] = time.perf_counter() - t0
    t = fresh(topo)
    t0 = time.perf_counter()
    t.to_dict(), t.advice(), t.summary()  # `fabricbench topo --json`
    out["topo"] = time.perf_counter() - t0
    t = fresh(topo)
    t0 = time.perf_counter()
    scaling_sets(t, sorted({k for k in (2, 4, 8, n // 2, n) if 2 <= k <= n}))  # `fabricbench scaling`
    out["scaling"] = time.perf_counter() - t0
    t = fresh(topo)
    t0 = time.perf_counter()
    rank_placements(t, list(t.indices), max(2, n // 2))
    out["placements"] = time.perf_counter() - t0
    t = fresh(topo)
    t0 = time.perf_counter()
    fabricbench.advise(fabricbench.AdviseConfig(model="mistral-7b", num_gpus=max(1, n // 2), topo=t,
                                                gpu_memory="80G"))
    out["advise"] = time.perf_counter() - t0
    return out


COLUMNS = ("islands", "topo", "scaling", "placements", "advise")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", type=float, default=1.0)
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--only", default=None, help="one shape (uniform, trays, islands8, irregular, pcie)")
    args = ap.parse_args()
    lines = [f"# topology analysis time by GPU count; {platform.node()} ({platform.processor() or platform.machine()}),"
             f" Python {platform.python_version()}, one process, seconds",
             f"{'shape':<10} {'gpus':>5} {'n_isl':>6} " + " ".join(f"{c:>10}" for c in COLUMNS)]
    print("\n".join(lines), flush=True)
    slow = []
    for name, sizes, make in CASES:
        if args.only and name != args.only:
            continue
        for n in sizes:
            topo = make(n)
            fabricbench.advise(fabricbench.AdviseConfig(  # warm the imports
                model="mistral-7b", num_gpus=1, topo=make(2), gpu_memory="80G"))
            t = time_case(topo)
            worst = max(t[c] for c in COLUMNS)
            line = f"{name:<10} {n:>5} {t['n_islands']:>6} " + " ".join(f"{t[c]:>10.4f}" for c in COLUMNS)
            print(line, flush=True)
            lines.append(line)
            if worst > args.max_seconds:
                slow.append(f"{name} {n}: {worst:.2f} s")
    lines.append(f"# over {args.max_seconds} s: {', '.join(slow) if slow else 'none'}")
    print(lines[-1])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
