"""nccl_diag: NCCL's own active diagnostics (NCCL_RUN_DIAGNOSTICS=1, NCCL >= 2.31), imported, judged.

    NCCL_RUN_DIAGNOSTICS=1 all_reduce_perf -b 8 -e 8G -f 2 -g 8 > ar.log; fabricbench import ar.log --out n.jsonl
    fabricbench qualify --spec my.toml --from n.jsonl

    [[check]]
    name = "nccl_diag"
    kind = "nccl_diag"
    min_p2p_fraction = 1.0   # every directed GPU pair NCCL uses P2P for passed its write/read check
    min_net_gbits = 320      # ib_write_bw's slowest rank, Gbit/s (NCCL prints Gbit/s: 400G NDR ~ 390)
    max_net_outliers = 0     # ranks NCCL found >30% off the median

The report is NCCL's (importing/nccl_diag.py reads it into `health` records, check "nccl-diag"); this kind
judges its figures like any other check, with codes and actions (codes.py). It measures nothing itself: a
live qualify run waives it and says how to produce the report.
"""

from __future__ import annotations

from typing import Any

from fabricbench.qualifying.checks.base import Check, CheckKind
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, at_most, equal, waived

FIELDS = {
    "min_p2p_fraction": Field("number", "share of the tested directed GPU P2P edges that must verify (default 1)",
                              fraction=True, default=1.0),
    "min_net_gbits": Field("number", "minimum ib_write_bw Gbit/s of the slowest rank, per NIC mode", positive=True),
    "max_net_outliers": Field("int", "ranks >30% off the median NCCL may name (default 0)", at_least=0, default=0),
}
HOW = ("run the job with NCCL_RUN_DIAGNOSTICS=1 (NCCL >= 2.31) with its stdout in a FILE, then "
       "`fabricbench import FILE --out RECORDS` and qualify --from RECORDS")


def _reports(ctx) -> list[dict[str, Any]]:
    return [r for r in getattr(ctx, "records", None) or []
            if r.get("kind") == "health" and r.get("check") == "nccl-diag"]


def _where(r: dict[str, Any]) -> str:
    return " ".join(x for x in (r.get("host"), f"comm {r['comm_hash']}" if r.get("comm_hash") else None,
                                f"{r['nranks']} ranks" if r.get("nranks") else None) if x) or "report"


def _said(r: dict[str, Any], kinds: tuple[str, ...]) -> str | None:
    found = [f for f in r.get("findings") or [] if f.get("kind") in kinds]
    if not found:
        return None
    text = "; ".join(f["detail"] + (f" ({f['advice']})" if f.get("advice") else "") for f in found[:4])
    return text + (f" (+{len(found) - 4} more)" if len(found) > 4 else "")


def judge(check: Check, ctx) -> list[Item]:
    reports = _reports(ctx)
    if not reports:
        return [waived("p2p_edges", f"no NCCL_RUN_DIAGNOSTICS report in the results: {HOW}")]
    p = check.params
    items: list[Item] = []
    for r in reports:
        where, extra = _where(r), r.get("extra") or {}
        p2p = extra.get("p2p")
        if p2p and p2p.get("tested"):
            items.append(at_least("p2p_edges", round(p2p["passed"] / p2p["tested"], 4), p["min_p2p_fraction"],
                                  subject=where, reason=_said(r, ("p2p",))
                                  or f"{p2p['passed']}/{p2p['tested']} directed GPU P2P edges verified"))
        for mode, fig in (extra.get("net_bw") or {}).items():
            if mode == "skipped" or p.get("min_net_gbits") is None:
                continue
            items.append(at_least("net_bw", fig["min_gbits"], p["min_net_gbits"], unit="Gbit/s",
                                  subject=f"{where}, {mode}", reason=_said(r, ("net_bw",))
                                  or f"min/median/max {fig['min_gbits']}/{fig['median_gbits']}/{fig['max_gbits']} "
                                     f"Gbit/s across {fig['ranks']} ranks"))
        outliers = [f for f in r.get("findings") or [] if f.get("kind") == "net_bw_outlier"]
        if extra.get("net_bw"):
            n = sum(f.get("more", 1) for f in outliers)
            items.append(at_most("net_outliers", n, p["max_net_outliers"], subject=where,
                                 reason=_said(r, ("net_bw_outlier",)) or "no rank >30% off the median"))
        if not extra.get("complete", True) or any(f.get("kind") == "incomplete" for f in r.get("findings") or []):
            items.append(equal("complete", "cut short", "completed", subject=where, ok=False,
                               reason=_said(r, ("incomplete",)) or "the report has no completed line"))
    if not items:
        items.append(waived("p2p_edges", "the reports hold no P2P summary and no network figure (one GPU per node "
                                         "and a single host: nothing NCCL could check)"))
    return items


NCCL_DIAG = CheckKind(name="nccl_diag", description="NCCL_RUN_DIAGNOSTICS' report (imported): P2P edges, net Gbit/s",
                      fields=FIELDS, judge=judge, measures=False,
                      threshold_keys=("min_p2p_fraction", "min_net_gbits", "max_net_outliers"))
