"""A user's fabric comparison: two fabrics side by side, the scaling of a GPU set, the copy matrix."""

from __future__ import annotations

from typing import Any

import fabricbench


def side_by_side() -> list[dict[str, Any]]:
    cpu = fabricbench.SweepConfig(engine="torch", backend="gloo", nprocs=2, ops=("all_reduce",),
                                  sizes=fabricbench.SizeSweep.parse("1M-16M:x4"))
    c: fabricbench.CompareResult = fabricbench.compare(
        fabricbench.CompareConfig(fabrics="default,shaped:1gbit", sweep=cpu), out="cmp.jsonl")
    if c.failed:
        print("a fabric failed:", c.run_id)
    rows: list[dict[str, Any]] = c.table["rows"]
    return rows


def scaling() -> list[dict[str, Any]]:
    gpus8 = fabricbench.SweepConfig(gpus=tuple(range(8)), ops=("all_reduce",), sizes=fabricbench.SizeSweep.parse("1G"))
    s: fabricbench.ScalingResult = fabricbench.scaling(fabricbench.ScalingConfig(counts=(2, 4, 8), sweep=gpus8))
    return s.rows


def copies() -> float | None:
    m: fabricbench.P2PResult = fabricbench.p2p(fabricbench.P2PConfig(gpus="0-3", size=256 << 20))
    first: list[float | None] = m.unidirectional_gbps[0]
    print(first, [r.gbps for r in m.host_results])
    h2d: float | None = m.host_gbps(0, "h2d")
    return h2d


if __name__ == "__main__":
    print(side_by_side(), scaling(), copies())
