"""contrast: the fast fabric is at least k times faster than the slow one — proof that the fast path
(NVLink) really carries the default run.

    [[check]]
    name = "nvlink_carries_default"
    kind = "contrast"
    fast = "default"
    slow = "p2p-off"
    size = "1G"
    min_ratio = 5            # two SXM GPUs measured ~10x (docs/domain.md)

ratio = slow median time / fast median time at `size` (= the algbw ratio, so it means the same for any
rank count). With one rank no traffic crosses the fabric: waived.
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.common import per_gpu_set, subject, sweep, unit_problem
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
    p = check.params

    def judge_set(gpus) -> list[Item]:
        subj = f"{subject(gpus, ctx)}, {p['op']} {format_size(p['size'])}"
        recs = {}
        for role in ("fast", "slow"):
            res = sweep(ctx, gpus, fabric=p[role], ops=(p["op"],), sizes=(p["size"],), dtype=p["dtype"])
            problem = unit_problem("ratio", res, f"{subj}, fabric {p[role]}")
            if problem:
                return [problem]
            r = next((r for r in res.records if r.get("kind") == "collective" and r.get("time_us")), None)
            if r is None:
                return [error("ratio", f"fabric {p[role]}: no time measured", subject=subj)]
            recs[role] = r
        if (recs["fast"].get("nranks") or 0) < 2:
            return [waived("ratio", "1 rank: nothing crosses the fabric, so fabrics cannot differ", subject=subj)]
        ratio = recs["slow"]["time_us"] / recs["fast"]["time_us"]
        return [at_least("ratio", ratio, p["min_ratio"], unit="x", subject=subj,
                         reason=f"{p['fast']} {recs['fast']['time_us']:.1f} µs vs {p['slow']} "
                                f"{recs['slow']['time_us']:.1f} µs")]

    return per_gpu_set(check, ctx, judge_set)


CONTRAST = CheckKind(name="contrast", description="one fabric at least k x faster than another",
                     fields=FIELDS, judge=judge, validate=validate)
