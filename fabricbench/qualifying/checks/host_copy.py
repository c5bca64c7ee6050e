"""host_copy: host-to-GPU and GPU-to-host copy bandwidth (pinned memory) of every GPU.

    [[check]]
    name = "host_links"
    kind = "host_copy"
    min_h2d_gbps = 45        # PCIe Gen5 x16 achieves ~55 GB/s (docs/domain.md)
    min_d2h_gbps = 45
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, error, waived

FIELDS = {
    "size": Field("size", "bytes per copy", default=256 << 20),
    "min_h2d_gbps": Field("number", "minimum host-to-GPU GB/s of every GPU", positive=True),
    "min_d2h_gbps": Field("number", "minimum GPU-to-host GB/s of every GPU", positive=True),
    "min_bidir_gbps": Field("number", "minimum both-ways GB/s of every GPU", positive=True),
}


def judge(check: Check, ctx) -> list[Item]:
    p = check.params
    if ctx.run.cpu_ranks:
        return [waived("host_copy", "gloo ranks: no GPU copies to measure")]
    n = ctx.visible_gpus()
    if n == 0:
        return [error("host_copy", "no CUDA GPU is visible here")]
    res = ctx.copies(tuple(range(n)), p["size"], peers=False, host=True)
    if res.error and not res.records:
        return [error("host_copy", f"the measurement failed: {res.error}")]
    items: list[Item] = []
    for direction in ("h2d", "d2h", "bidir"):
        want = p.get(f"min_{direction}_gbps")
        if want is None:
            continue
        got = {(r["dst"] if r["src"] == "host" else r["src"]): r["gbps"] for r in res.records
               if r.get("copy_kind") == "host" and r.get("direction") == direction}
        if not got:
            items.append(error(direction, "not measured"))
            continue
        bad = [g for g, v in got.items() if v < want]
        for g in bad:
            items.append(at_least(direction, got[g], want, unit="GB/s", subject=g))
        if not bad:
            g = min(got, key=got.get)
            items.append(at_least(direction, got[g], want, unit="GB/s", subject=f"slowest {g}"))
    return items


HOST_COPY = CheckKind(name="host_copy", description="host<->GPU copy GB/s of every GPU",
                      fields=FIELDS, judge=judge, threshold_keys=("min_h2d_gbps", "min_d2h_gbps", "min_bidir_gbps"))
