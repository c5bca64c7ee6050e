"""The measured collectives an export is built from: one fabric's timed records (simai.py, simumax.py).

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml --fabric nvswitch
"""

from __future__ import annotations

from typing import Any

from fabricbench.errors import UsageError
from fabricbench.results.status import TIMED_COLLECTIVE


def one_fabric(records: list[dict[str, Any]], fabric: str | None, *, reader: str) -> tuple[str, list[dict[str, Any]]]:
    """(fabric, its collectives with a busbw and a size); `reader` names the tool that reads one table."""
    colls = [r for r in records if r.get("kind") == "collective" and r.get("status") in TIMED_COLLECTIVE
             and r.get("busbw_gbps") and r.get("bytes") and not (r.get("extra") or {}).get("observed")]
    if not colls:
        raise UsageError("no measured collective with a busbw in the results (a sweep, compare or study)")
    fabrics = sorted({r.get("fabric") or "default" for r in colls})
    if fabric is None and len(fabrics) > 1:
        raise UsageError(f"the results hold {len(fabrics)} fabrics ({', '.join(fabrics)}); choose one with --fabric "
                         f"({reader} reads one table)")
    fabric = fabric or fabrics[0]
    if fabric not in fabrics:
        raise UsageError(f"--fabric {fabric}: the results have {', '.join(fabrics)}")
    return fabric, [r for r in colls if (r.get("fabric") or "default") == fabric]
