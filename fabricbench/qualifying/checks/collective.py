"""collective: bus bandwidth, small-message latency and run-to-run spread of one collective on a GPU set.

    [[check]]
    name = "allreduce_pairs"
    kind = "collective"
    op = "all_reduce"
    sizes = ["8", "1G"]
    gpus = "each_pair"
    reference_busbw_gbps = 367     # 8xH200 SXM, NVLS off (docs/domain.md)
    min_fraction = 0.8             # threshold = 0.8 x 367
    max_latency_us = 30            # at the smallest size (latency_size)
    max_cv = 0.1                   # at every size from 1 MiB up (all sizes when none is that large)

busbw is nccl-tests' (algbw x the collective's factor, fabricbench/collectives/); with one rank the factor
is 0 and a busbw threshold is waived with that reason. The threshold applies at `busbw_size` (default:
the largest size), the latency at `latency_size` (default: the smallest).
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.common import (READ_AT, WHERE, absent, by_size, nccl_facts, per_gpu_set,
                                                  source_tool, subject, sweep, unit_problem)
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, at_most, error, waived
from fabricbench.results.status import TIMED_COLLECTIVE, Status
from fabricbench.sizes import format_size

CV_FROM = 1 << 20  # max_cv judges sizes from here up, when the check has any

FIELDS = {
    "op": Field("op", "the collective", required=True),
    "sizes": Field("sizes", "sizes to run", required=True),
    **WHERE,
    "min_busbw_gbps": Field("number", "minimum busbw at busbw_size, GB/s", positive=True),
    "reference_busbw_gbps": Field("number", "a published busbw figure, GB/s (with min_fraction)", positive=True),
    "min_fraction": Field("number", "threshold = min_fraction x reference_busbw_gbps", fraction=True),
    "busbw_size": Field("size", "the size the busbw threshold applies at (default: the largest)"),
    "max_latency_us": Field("number", "maximum median time at latency_size, µs", positive=True),
    "latency_size": Field("size", "the size the latency threshold applies at (default: the smallest)"),
    "max_cv": Field("number", "maximum coefficient of variation at every size from 1 MiB up", positive=True),
}


def validate(p: dict) -> None:
    if (p.get("reference_busbw_gbps") is None) != (p.get("min_fraction") is None):
        key = "min_fraction" if p.get("min_fraction") is None else "reference_busbw_gbps"
        raise Invalid(key, "reference_busbw_gbps and min_fraction go together (threshold = fraction x "
                           "reference); give both")
    if p.get("reference_busbw_gbps") is not None and p.get("min_busbw_gbps") is not None:
        raise Invalid("min_busbw_gbps", "give min_busbw_gbps or reference_busbw_gbps x min_fraction, not both")
    for key in ("busbw_size", "latency_size"):
        if p.get(key) is not None and p[key] not in p["sizes"]:
            raise Invalid(key, f"{key} = {format_size(p[key])} is not among sizes "
                               f"({', '.join(format_size(s) for s in p['sizes'])}); add it there")


def threshold(p: dict) -> tuple[float | None, str | None]:
    if p.get("min_busbw_gbps") is not None:
        return p["min_busbw_gbps"], None
    if p.get("reference_busbw_gbps") is not None:
        return (p["reference_busbw_gbps"] * p["min_fraction"],
                f"{p['min_fraction']:g} x reference {p['reference_busbw_gbps']:g} GB/s")
    return None, None


def judge(check: Check, ctx) -> list[Item]:
    p = check.params
    floor, floor_why = threshold(p)
    bsize = p.get("busbw_size") or max(p["sizes"])
    lsize = p.get("latency_size") or min(p["sizes"])

    def judge_set(gpus) -> list[Item]:
        subj = subject(gpus, ctx, p["fabric"])
        res = sweep(ctx, gpus, fabric=p["fabric"], ops=(p["op"],), sizes=p["sizes"], dtype=p["dtype"])
        problem = unit_problem(p["op"], res, subj)
        if problem:
            return [problem]
        items: list[Item] = []
        recs = by_size(res.records, p["op"])
        offline = getattr(ctx, "offline", False)  # recorded results (--from): judged on what they hold
        if floor is not None:
            r = by_size(res.records, p["op"], stand_ins=True).get(bsize)
            label = f"{subj}, {format_size(bsize)}"
            if r is None and offline:
                items.append(absent("busbw", bsize, p["op"], ctx, label))
            elif r is None or r.get("status") not in TIMED_COLLECTIVE:
                items.append(_missing("busbw", r, label))
            elif r.get("busbw_gbps") is None:
                items.append(waived("busbw", r.get("busbw_note") or "no bus bandwidth at this rank count",
                                    subject=label))
            else:
                facts = nccl_facts(r)
                why = "; ".join(x for x in (floor_why, facts) if x) or None
                item = at_least("busbw", r["busbw_gbps"], floor, unit="GB/s", subject=label, reason=why)
                items.append(_read_smaller(item, r, bsize, ctx) if r.get(READ_AT) else item)
        if p.get("max_latency_us") is not None:
            r = recs.get(lsize)
            label = f"{subj}, {format_size(lsize)}"
            if r is None and offline:
                items.append(absent("latency", lsize, p["op"], ctx, label))
            elif r is None or r.get("time_us") is None:
                items.append(_missing("latency", r, label))
            else:
                items.append(at_most("latency", r["time_us"], p["max_latency_us"], unit="µs", subject=label))
        if p.get("max_cv") is not None:
            # from 1 MiB up: smaller sizes are bound by launches and timers, noisy on any healthy node
            cvs = [(s, r["cv"]) for s, r in recs.items() if r.get("cv") is not None]
            if any(s >= CV_FROM for s, _ in cvs):
                cvs = [(s, cv) for s, cv in cvs if s >= CV_FROM]
            tool = source_tool(res.records)
            if not cvs and tool:  # nccl-tests prints one mean per size: no spread to judge, not a failure
                items.append(waived("cv", f"not measured by this source: {tool} results carry no run-to-run "
                                          f"spread (cv)", subject=subj))
            elif not cvs and offline:
                items.append(waived("cv", f"not measured by this source: {ctx.source} holds no spread at the "
                                          f"check's sizes", subject=subj))
            elif not cvs:
                items.append(error("cv", "no size was measured", subject=subj))
            else:
                s, cv = max(cvs, key=lambda sc: sc[1])
                items.append(at_most("cv", cv, p["max_cv"], subject=f"{subj}, worst at {format_size(s)}"))
        return items

    return per_gpu_set(check, ctx, judge_set)


def _read_smaller(item: Item, rec, size: int, ctx) -> Item:
    """A floor read at the largest size below the one it is for (recorded results that stop short of it).
    A pass holds (busbw rises with size); a miss there says nothing about the size wanted: unknown."""
    at = format_size(rec[READ_AT])
    where = f"read at {at}, the largest size below {format_size(size)} in {ctx.source}"
    item.subject = f"{item.subject} (read at {at})"
    if item.status == Status.PASS:
        item.reason = "; ".join(x for x in (where, item.reason) if x)
        return item
    item.status = Status.ERROR
    item.reason = (f"below the floor at {at}, which says nothing of {format_size(size)}, where busbw is higher: "
                   f"{where}; measure {format_size(size)} to judge")
    return item


def _missing(criterion: str, rec, label: str) -> Item:
    if rec is None:
        return error(criterion, "this size was not measured", subject=label)
    if rec.get("status") == Status.WAIVED:
        return waived(criterion, rec.get("message") or "waived by the sweep", subject=label)
    return error(criterion, f"status {rec.get('status')}: {rec.get('message')}", subject=label)


COLLECTIVE = CheckKind(name="collective", description="busbw (absolute or x reference), latency, CV of a collective",
                       fields=FIELDS, judge=judge, validate=validate, scope="collective",
                       threshold_keys=("min_busbw_gbps", "reference_busbw_gbps", "max_latency_us", "max_cv"))
