"""Imported DCGM diagnostics and NCCL RAS health folded into a node's verdicts (`qualify --from`).

    fabricbench import dcgm.json ras.json nccl-tests.log --out node.jsonl
    fabricbench qualify --spec builtin:h200-sxm-8 --from node.jsonl

Beside the spec's checks, a file holding `diag` or `health` records (results/health.py) gets these verdicts,
each with its own codes (codes.py) and actions:
- dcgm: one item per DCGM test and entity; a failed test is critical (FB_DCGM_FAIL), passes pass;
- dcgm_warnings: DCGM's warn results, a warning (FB_DCGM_WARN);
- nccl_ras: per communicator, a missing rank (FB_RAS_MISSING_RANK), a dead one (FB_RAS_DEAD_RANK) or a rank
  that reports an error (FB_RAS_ERROR) is critical; the item names the rank's host, GPU and pid;
- nccl_ras_mismatch: ranks that launched different numbers of an operation, a warning (FB_RAS_MISMATCH): a
  snapshot may catch ranks in flight; a count that stays behind over two snapshots is a hang.
Skipped or not-run DCGM tests are waived with DCGM's words. A qualify --fleet reads these verdicts per node
like any other (their codes, severities and the failing items' counts).
"""

from __future__ import annotations

from typing import Any

from fabricbench.qualifying.verdict import Item, Policy, Verdict, combine, waived
from fabricbench.results.status import Severity, Status

CRITICAL, WARNING = Policy(severity=Severity.CRITICAL), Policy(severity=Severity.WARNING)


def verdicts(records: list[dict[str, Any]], source: str) -> list[Verdict]:
    diag = [r for r in records if r.get("kind") == "diag"]
    # NCCL RAS only: NCCL_RUN_DIAGNOSTICS reports (check "nccl-diag") are judged by the nccl_diag check kind
    health = [r for r in records if r.get("kind") == "health" and r.get("check", "ncclras") == "ncclras"]
    out = []
    if diag:
        out.append(combine("dcgm", "dcgm", [_diag_item(r) for r in diag if r.get("result") != "warn"] or
                           [waived("fail", f"{source}: every DCGM result is a warning (see dcgm_warnings)")],
                           description=f"DCGM diagnostics imported from {source}: no test fails", policy=CRITICAL))
        warns = [r for r in diag if r.get("result") == "warn"]
        if warns:
            out.append(combine("dcgm_warnings", "dcgm", [_diag_item(r) for r in warns],
                               description="DCGM diagnostics: warnings", policy=WARNING))
    if health:
        grave = [i for r in health for i in _ras_items(r, ("missing", "dead", "error", "incomplete", "timeout"))]
        out.append(combine("nccl_ras", "nccl_ras", grave or [_ok(health)], policy=CRITICAL,
                           description=f"NCCL RAS imported from {source}: no rank missing, dead or in error"))
        odd = [i for r in health for i in _ras_items(r, ("mismatch",))]
        if odd:
            out.append(combine("nccl_ras_mismatch", "nccl_ras", odd, policy=WARNING,
                               description="NCCL RAS: ranks of a communicator at different operation counts"))
    return out


def _diag_item(r: dict[str, Any]) -> Item:
    subject = f"{r.get('entity_group') or 'GPU'} {r.get('entity_id')}: {r.get('test')}"
    result = r.get("result")
    errs = r.get("errors") or []
    why = "; ".join(f"DCGM error {e.get('error_id')} ({e.get('category_name') or e.get('category')}, "
                    f"severity {e.get('severity_name') or e.get('severity')}): {e.get('message')}"
                    if e.get("error_id") is not None else str(e.get("message")) for e in errs)
    if result == "pass":
        return Item(criterion="fail", status=Status.PASS, subject=subject, measured="pass", threshold="pass",
                    sense="equal")
    if result in ("skip", "not run"):
        return waived("fail", f"DCGM: {result}" + (f"; {why}" if why else ""), subject=subject)
    return Item(criterion="warn" if result == "warn" else "fail", status=Status.FAIL, subject=subject,
                measured=result, threshold="pass", sense="equal", reason=why or f"DCGM result {result}")


def _who(rank: dict[str, Any]) -> str:
    parts = [f"rank {rank['rank']}" if rank.get("rank") is not None else None,
             f"host {rank['host']}" if rank.get("host") else None,
             f"GPU {rank['gpu']}" if rank.get("gpu") is not None else None,
             f"pid {rank['pid']}" if rank.get("pid") is not None else None]
    return " ".join(p for p in parts if p)


def _ras_items(r: dict[str, Any], kinds: tuple[str, ...]) -> list[Item]:
    comm = r.get("comm_hash") or "the job"
    items = []
    for f in r.get("findings") or []:
        if f.get("kind") not in kinds:
            continue
        crit = {"incomplete": "missing", "timeout": "error"}.get(f["kind"], f["kind"])
        ranks = f.get("ranks") or []
        named = "; ".join(_who(x) for x in ranks[:8]) + (f" (+{len(ranks) - 8} more)" if len(ranks) > 8 else "")
        items.append(Item(criterion=crit, status=Status.FAIL, subject=f"communicator {comm}",
                          measured=f"{len(ranks)} rank(s)" if ranks else f.get("kind"), threshold="none",
                          sense="equal", reason=f"{f.get('detail')}" + (f": {named}" if named else "")))
    return items


def _ok(health: list[dict[str, Any]]) -> Item:
    n = len(health)
    return Item(criterion="missing", status=Status.PASS, subject=f"{n} communicator(s)", measured="none",
                threshold="none", sense="equal")
