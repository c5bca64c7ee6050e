"""nvbandwidth's JSON output (`nvbandwidth -j`) -> the same copy records as its text (nvbandwidth.py).

    ./nvbandwidth -j > nvb.json && fabricbench import nvb.json --out imported.jsonl

{"nvbandwidth": {"version": ..., "testcases": [{"name", "status", "bandwidth_description" (the text
output's matrix title), "bandwidth_matrix" (rows of strings, "N/A" where not measured), "sum"}]}}.
"""

from __future__ import annotations

import json
from typing import Any

from fabricbench.importing.base import Source
from fabricbench.importing.nvbandwidth import matrix_records, title

TOOL = "nvbandwidth"


def sniff(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith("{") and '"nvbandwidth"' in head


def read(src: Source) -> list[dict[str, Any]]:
    try:
        doc = src.loads(src.text)
    except json.JSONDecodeError as e:
        src.fail(e.lineno, f"not valid JSON ({e.msg}); nvbandwidth -j writes one JSON document")
    root = doc.get("nvbandwidth") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        src.fail(1, "no 'nvbandwidth' object: not nvbandwidth -j output")
    version = root.get("version") if isinstance(root.get("version"), str) else None
    out: list[dict[str, Any]] = []
    for i, tc in enumerate(root.get("testcases") or []):
        if not isinstance(tc, dict) or not isinstance(tc.get("bandwidth_matrix"), list):
            continue  # waived, not found or failed: no figures
        parsed = title(str(tc.get("bandwidth_description") or ""))
        if parsed is None:
            src.warn(None, f"testcases[{i}] ({tc.get('name')}): a matrix titled "
                           f"{str(tc.get('bandwidth_description'))[:60]!r} is no copy bandwidth; skipped")
            continue
        rows = [[str(c) for c in row] for row in tc["bandwidth_matrix"] if isinstance(row, list)]
        recs = matrix_records(src, rows=[(r, row) for r, row in enumerate(rows)], version=version,
                              test=tc.get("name"), line=None, names={}, parsed=parsed)
        sum_gbps = tc.get("sum")
        for rec in recs:
            if isinstance(sum_gbps, (int, float)):
                rec["extra"]["sum_gbps"] = sum_gbps
            rec["extra"]["status"] = tc.get("status")
        out += recs
    return out
