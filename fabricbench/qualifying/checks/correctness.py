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
from fabricbench.qualifying.checks.common import WHERE, not_here, subject, unit_problem
from fabricbench.qualifying.fields import READERS, Field, FieldError
from fabricbench.qualifying.verdict import Item, at_most, error
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
    from fabricbench.qualifying.context import SweepUnit  # context -> spec -> checks: not at the top

    p = check.params
    sets, why = ctx.gpu_sets(p["gpus"])
    if why:
        return [not_here("gpus", why)]
    items: list[Item] = []
    for gpus in sets:
        subj = subject(gpus, ctx, p["fabric"])
        res = ctx.sweep(SweepUnit(fabric=p["fabric"], ops=tuple(p["ops"]), sizes=p["sizes"], dtype=p["dtype"],
                                  gpus=gpus, check=True, run=ctx.run))
        problem = unit_problem("wrong", res, subj)
        if problem:
            items.append(problem)
            continue
        checked = [r for r in res.records if r.get("kind") == "collective" and r.get("status") != Status.WAIVED]
        unchecked = [r for r in checked if r.get("wrong") is None]
        if not checked or unchecked:
            items.append(error("wrong", f"{len(unchecked)} of {len(checked)} measurements carry no check result"
                                        + (f" ({res.error})" if res.error else ""), subject=subj))
            continue
        wrong = sum(int(r["wrong"]) for r in checked)
        worst = max(checked, key=lambda r: r["wrong"])
        where = f"{subj}, {len(checked)} op/size cases" + (
            f", worst {worst['op']} {worst['requested_bytes']} B" if wrong else "")
        items.append(at_most("wrong", float(wrong), float(p["max_wrong"]), unit="elements", subject=where))
    return items


CORRECTNESS = CheckKind(name="correctness", description="--check gives zero wrong elements",
                        fields=FIELDS, judge=judge, validate=validate, scope="collective")
