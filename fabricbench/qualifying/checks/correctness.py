"""correctness: `sweep --check` on exactly known inputs gives zero wrong elements.

    [[check]]
    name = "allreduce_correct"
    kind = "correctness"
    ops = ["all_reduce", "all_gather"]
    sizes = ["4K", "64M"]

Inputs are fresh random values each run (a fixed pattern can hide a wrong reduction order).
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.common import READ_AT, WHERE, per_gpu_set, subject, sweep, unit_problem
from fabricbench.qualifying.fields import READERS, Field, FieldError
from fabricbench.qualifying.verdict import Item, at_most, error, waived
from fabricbench.results.status import Status

FIELDS = {
    "ops": Field("str_list", "collectives to check", default=("all_reduce",)),
    "sizes": Field("sizes", "sizes to check", default=(4096, 1 << 24)),
    **WHERE,
    "max_wrong": Field("int", "wrong elements tolerated (0)", default=0, at_least=0),
}


def validate(p: dict) -> None:
    try:
        p["ops"] = tuple(READERS["op"][0](o) for o in p["ops"])
    except FieldError as e:
        raise Invalid("ops", str(e)) from None


def judge(check: Check, ctx) -> list[Item]:
    p = check.params

    def judge_set(gpus) -> list[Item]:
        subj = subject(gpus, ctx, p["fabric"])
        res = sweep(ctx, gpus, fabric=p["fabric"], ops=p["ops"], sizes=p["sizes"], dtype=p["dtype"], check=True)
        problem = unit_problem("wrong", res, subj)
        if problem:
            return [problem]
        checked = [r for r in res.records if r.get("kind") == "collective" and r.get("status") != Status.WAIVED
                   and r.get(READ_AT) is None]  # a size recorded results lack is not checked at another
        if not checked and getattr(ctx, "offline", False):
            return [waived("wrong", f"not measured by this source: {ctx.source} holds no record at these sizes",
                           subject=subj)]
        unchecked = [r for r in checked if r.get("wrong") is None]
        if not checked or unchecked:
            return [error("wrong", f"{len(unchecked)} of {len(checked)} measurements carry no check result"
                                   + (f" ({res.error})" if res.error else ""), subject=subj)]
        wrong = sum(int(r["wrong"]) for r in checked)
        worst = max(checked, key=lambda r: r["wrong"])
        where = f"{subj}, {len(checked)} op/size cases" + (
            f", worst {worst['op']} {worst['requested_bytes']} B" if wrong else "")
        return [at_most("wrong", float(wrong), float(p["max_wrong"]), unit="elements", subject=where)]

    return per_gpu_set(check, ctx, judge_set)


CORRECTNESS = CheckKind(name="correctness", description="--check gives zero wrong elements",
                        fields=FIELDS, judge=judge, validate=validate, scope="collective")
