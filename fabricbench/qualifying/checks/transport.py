"""transport: the transport NCCL really used under each fabric, read from its INFO log.

    [[check]]
    name = "transports"
    kind = "transport"
    expect = { default = "P2P", "p2p-off" = "SHM", net = "NET" }

The expected value is a transport family (P2P, SHM, NET) or several joined by '+': the check passes
when the families NCCL logged are exactly those. gloo ranks open no NCCL transport (waived); one rank
opens none either (waived).
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.common import per_gpu_set, subject, sweep, unit_problem
from fabricbench.qualifying.fields import Field, FieldError, READERS
from fabricbench.qualifying.verdict import Item, equal, error, waived

FAMILIES = ("P2P", "SHM", "NET")
FIELDS = {
    "expect": Field("str_map", "fabric -> transport family, e.g. {default = \"P2P\"}", required=True),
    "op": Field("op", "the collective that opens the connections", default="all_reduce"),
    "size": Field("size", "its size", default=1 << 20),
    "gpus": Field("gpu_sets", "where it runs", default="all"),
    "dtype": Field("dtype", "element type", default="float32"),
}


def validate(p: dict) -> None:
    for fabric, want in p["expect"].items():
        try:
            READERS["fabric"][0](fabric)
        except FieldError as e:
            raise Invalid("expect", f"fabric {fabric!r}: {e}") from None
        fams = [w.strip().upper() for w in want.split("+")]
        bad = [f for f in fams if f not in FAMILIES]
        if bad:
            raise Invalid("expect", f"fabric {fabric!r}: {want!r} is not a transport family; write one of "
                                    f"{', '.join(FAMILIES)} or several joined by '+'")


def families(label: str | None) -> set[str]:
    if not label:
        return set()
    return {t.split("/")[0].strip().upper() for t in label.split("+") if t.strip()}


def judge(check: Check, ctx) -> list[Item]:
    p = check.params
    if ctx.run.cpu_ranks:
        return [waived("transport", "gloo ranks: NCCL opens no transport")]

    def judge_fabric(gpus, fabric: str, want: str) -> Item:
        label = f"{subject(gpus, ctx)}, fabric {fabric}"
        res = sweep(ctx, gpus, fabric=fabric, ops=(p["op"],), sizes=(p["size"],), dtype=p["dtype"])
        problem = unit_problem("transport", res, label)
        if problem:
            return problem
        nranks = max((r.get("nranks") or 0 for r in res.records), default=0)
        if nranks < 2:
            return waived("transport", f"{nranks} rank: NCCL connects no peers, so no transport", subject=label)
        got = families(res.transport)
        if not got and getattr(ctx, "offline", False):  # a file without NCCL's log lines: not an error
            return waived("transport", f"not measured by this source: {ctx.source} names no NCCL transport "
                                       f"(NCCL_DEBUG=INFO lines)", subject=label)
        if not got or (res.transport or "").startswith("unknown"):
            return error("transport", f"NCCL's log named no transport ({res.transport})", subject=label)
        expect = {w.strip().upper() for w in want.split("+")}
        return equal("transport", res.transport, want, subject=label, ok=got == expect, reason=res.mismatch)

    return per_gpu_set(check, ctx, lambda gpus: [judge_fabric(gpus, f, w) for f, w in p["expect"].items()])


TRANSPORT = CheckKind(name="transport", description="the transport NCCL used under each fabric",
                      fields=FIELDS, judge=judge, validate=validate)
