"""contrast: the fast fabric is at least k times faster than the slow one — proof that the fast path
(NVLink) really carries the default run.

    [[check]]
    name = "nvlink_carries_default"
    kind = "contrast"
    fast = "default"
    slow = "p2p-off"
    size = "1G"
    min_ratio = 5            # two SXM GPUs measured ~10x (shared/DOMAIN.md)

ratio = slow median time / fast median time at `size` (= the algbw ratio, so it means the same for any
rank count). With one rank no traffic crosses the fabric: waived.
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.common import not_here, subject, unit_problem
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, error, waived
from fabricbench.sizes import format_size

FIELDS = {
    "fast": Field("fabric", "the fabric expected to be faster", default="default"),
    "slow": Field("fabric", "the fabric expected to be slower", default="p2p-off"),
    "op": Field("op", "the collective", default="all_reduce"),
    "size": Field("size", "the size compared", default=1 << 30),
    "gpus": Field("gpu_sets", "where it runs", default="all"),
    "dtype": Field("dtype", "element type", default="float32"),
    "min_ratio": Field("number", "slow time / fast time at least this", required=True, positive=True),
}


def validate(p: dict) -> None:
    if p["fast"] == p["slow"]:
        raise Invalid("slow", f"fast and slow are both {p['fast']!r}; compare two different fabrics")


def judge(check: Check, ctx) -> list[Item]:
    from fabricbench.qualifying.context import SweepUnit  # context -> spec -> checks: not at the top

    p = check.params
    sets, why = ctx.gpu_sets(p["gpus"])
    if why:
        return [not_here("gpus", why)]
    items: list[Item] = []
    for gpus in sets:
        subj = f"{subject(gpus, ctx)}, {p['op']} {format_size(p['size'])}"
        recs = {}
        for role in ("fast", "slow"):
            res = ctx.sweep(SweepUnit(fabric=p[role], ops=(p["op"],), sizes=(p["size"],), dtype=p["dtype"],
                                      gpus=gpus, check=False, run=ctx.run))
            problem = unit_problem("ratio", res, f"{subj}, fabric {p[role]}")
            if problem:
                items.append(problem)
                break
            r = next((r for r in res.records if r.get("kind") == "collective" and r.get("time_us")), None)
            if r is None:
                items.append(error("ratio", f"fabric {p[role]}: no time measured", subject=subj))
                break
            recs[role] = r
        if len(recs) < 2:
            continue
        if (recs["fast"].get("nranks") or 0) < 2:
            items.append(waived("ratio", "1 rank: nothing crosses the fabric, so fabrics cannot differ",
                                subject=subj))
            continue
        ratio = recs["slow"]["time_us"] / recs["fast"]["time_us"]
        items.append(at_least("ratio", ratio, p["min_ratio"], unit="x", subject=subj,
                              reason=f"{p['fast']} {recs['fast']['time_us']:.1f} µs vs {p['slow']} "
                                     f"{recs['slow']['time_us']:.1f} µs"))
    return items


CONTRAST = CheckKind(name="contrast", description="one fabric at least k x faster than another",
                     fields=FIELDS, judge=judge, validate=validate)
