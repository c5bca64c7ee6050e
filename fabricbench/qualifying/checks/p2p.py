"""p2p: GPU-to-GPU copy bandwidth of every ordered pair, and its uniformity.

    [[check]]
    name = "peer_copies"
    kind = "p2p"
    size = "256M"
    min_gbps = 300                  # every pair, unidirectional
    min_fraction_of_median = 0.9    # no pair below 0.9 x the median pair

Measured by `fabricbench p2p` (cudaMemcpyPeerAsync, measuring/copy.py). A pair check on one GPU is waived.
"""

from __future__ import annotations

import statistics

from fabricbench.qualifying.checks.base import Check, CheckKind
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, error, waived

FIELDS = {
    "size": Field("size", "bytes per copy", default=256 << 20),
    "direction": Field("str", "uni or bidir", default="uni", choices=("uni", "bidir")),
    "min_gbps": Field("number", "minimum GB/s of every ordered pair", positive=True),
    "min_fraction_of_median": Field("number", "no pair below this fraction of the median pair", fraction=True),
}


def judge(check: Check, ctx) -> list[Item]:
    p = check.params
    if ctx.run.cpu_ranks:
        return [waived("p2p", "gloo ranks: no GPU copies to measure")]
    n = ctx.visible_gpus()
    if n == 0:
        return [error("p2p", "no CUDA GPU is visible here")]
    if n < 2:
        return [waived("p2p", f"{n} GPU visible: a pair check needs at least 2")]
    res = ctx.copies(tuple(range(n)), p["size"], peers=True, host=False)
    if res.error and not res.records:
        return [error("p2p", f"the measurement failed: {res.error}")]
    pairs = {(r["src"], r["dst"]): r["gbps"] for r in res.records
             if r.get("copy_kind") == "peer" and r.get("direction") == p["direction"] and r["src"] != r["dst"]}
    if not pairs:
        return [error("p2p", "no pair was measured")]
    items: list[Item] = []
    weakest = min(pairs, key=pairs.get)
    if p.get("min_gbps") is not None:
        bad = [k for k, v in pairs.items() if v < p["min_gbps"]]
        for s, d in bad:
            items.append(at_least("min_gbps", pairs[(s, d)], p["min_gbps"], unit="GB/s", subject=f"{s}->{d}"))
        if not bad:
            items.append(at_least("min_gbps", pairs[weakest], p["min_gbps"], unit="GB/s",
                                  subject=f"weakest {weakest[0]}->{weakest[1]}"))
    if p.get("min_fraction_of_median") is not None:
        med = statistics.median(pairs.values())
        frac = p["min_fraction_of_median"]
        bad = [k for k, v in pairs.items() if v < frac * med]
        why = f"{frac:g} x median pair {med:.1f} GB/s"
        for s, d in bad:
            items.append(at_least("uniformity", pairs[(s, d)], frac * med, unit="GB/s", subject=f"{s}->{d}",
                                  reason=why))
        if not bad:
            items.append(at_least("uniformity", pairs[weakest], frac * med, unit="GB/s",
                                  subject=f"weakest {weakest[0]}->{weakest[1]}", reason=why))
    return items


P2P = CheckKind(name="p2p", description="GPU-to-GPU copy GB/s per pair, and uniformity",
                fields=FIELDS, judge=judge, threshold_keys=("min_gbps", "min_fraction_of_median"))
