"""The record kinds qualify writes, declared to the shared reader (results/fields.py): its units and its
verdicts.

    fabricbench qualify --fleet node1/ node2/      (each node's verdicts read back and checked against these)

Registered when fabricbench.qualifying is imported (its __init__ imports this module).
"""

from __future__ import annotations

from typing import Any

from fabricbench.results.fields import COUNT, DURATION, NUM, register_kind
from fabricbench.results.status import Status, parse_severity


def _severity(rec: dict[str, Any]) -> str | None:
    if rec.get("severity") is not None and parse_severity(rec["severity"]) is None:
        return f"severity {str(rec['severity'])[:40]!r} is not a severity"
    return None


register_kind("verdict", {
    "check!": str, "check_kind": str, "status!": str, "severity": str, "code": str, "criterion": str,
    "subject": str, "reason": str, "unit": str, "sense": str, "headroom": NUM, "duration_s": DURATION,
    "action": str, "items": [{"criterion!": str, "status!": str}], "attempts": [dict], "busy_host": str,
}, statuses=frozenset({Status.PASS, Status.FAIL, Status.WAIVED, Status.ERROR}), check=_severity)
register_kind("qualify_unit", {
    "key!": str, "status": str, "error": str, "waived": str, "transport": str, "transport_mismatch": str,
    "facts": dict, "nrecords": COUNT,
}, statuses=frozenset({Status.OK, Status.WAIVED, Status.ERROR}))
