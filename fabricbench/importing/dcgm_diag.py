"""DCGM diagnostics (`dcgmi diag -r N -j`, DCGM 3.x and 4.x layouts) -> `diag` records, one per test and entity.

    dcgmi diag -r 2 -j > dcgm.json; fabricbench import dcgm.json --out node.jsonl
    fabricbench qualify --spec builtin:h200-sxm-8 --from node.jsonl     (a DCGM failure is critical)

Layouts, both read:
- 3.x: {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"gpu_ids"
  (an int, or "0,1,2" for a result shared by those GPUs), "status" ("PASS"/"Fail"/"Skip"...), "warnings",
  "info"}]}]}], "version"}}; `null` may stand between tests (DCGM's own test holds such real output);
- 4.x: {"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group", "entity_group_id",
  "entity_id", "status", "warnings": [{"error_category", "error_id", "error_severity", "warning"}], "info"}],
  "test_summary": {"status", "info"}}]}, "entity_groups": [...], "metadata": {"version", "Driver Version
  Detected"}}; "runtime_error" when the run failed.
Text before the document (dcgmi's banner, warnings) is skipped. Figures stated in info lines ("GPU to Host
bandwidth: 24.02 GB/s", "latency: 3.024 us", "approximately 859.08 gigaflops") become `figures`; severities
and categories keep DCGM's numbers and get their names (dcgm_errors.h). A run with a runtime_error or no test
result is an error (exit 2), never an empty success.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fabricbench.importing.base import Source
from fabricbench.results.health import DiagRecord

TOOL = "dcgm-diag"
ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, 3.x
# dcgm_errors.h: dcgmErrorSeverity_t and dcgmErrorCategory_t
SEVERITY = {0: "none", 1: "monitor", 2: "isolate", 3: "unknown", 4: "triage", 5: "config", 6: "reset"}
CATEGORY = {0: "none", 1: "perf threshold", 2: "perf violation", 3: "software config", 4: "software library",
            5: "software xid", 6: "software cuda", 7: "software eud", 8: "software other", 9: "hardware thermal",
            10: "hardware memory", 11: "hardware nvlink", 12: "hardware nvswitch", 13: "hardware pcie",
            14: "hardware power", 15: "hardware other", 16: "internal other"}
_RESULT = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "warn": "warn", "warning": "warn",
           "skip": "skip", "skipped": "skip", "not run": "not run", "notrun": "not run"}
_FIGURE = re.compile(r"([A-Za-z][A-Za-z0-9 ]*?)\s*(?::|at approximately|of)\s*([0-9]+(?:\.[0-9]+)?)\s*"
                     r"(GB/s|us|ms|gigaflops|GB|MHz|W|C)\b")


def sniff(text: str) -> bool:
    return any(f'"{r}"' in text[:4096] for r in ROOTS)


def read(src: Source) -> list[dict[str, Any]]:
    start = src.text.find("{")
    try:
        doc = src.loads(src.text[start:]) if start >= 0 else None
    except json.JSONDecodeError as e:
        src.fail(None, f"not readable as dcgmi diag JSON ({e.msg})")
    root_key = next((k for k in ROOTS if isinstance(doc, dict) and k in doc), None)
    if root_key is None or not isinstance(doc[root_key], dict):
        src.fail(None, "dcgmi diag JSON without a 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' object")
    root = doc[root_key]
    if root.get("runtime_error"):
        src.fail(None, f"the DCGM diagnostic did not run: {str(root['runtime_error'])[:200]}")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = meta.get("version") or root.get("version")
    driver = meta.get("Driver Version Detected") or root.get("driver_version_detected")
    layout = "4.x" if root_key == "DCGM Diagnostic" else "3.x"
    out: list[dict[str, Any]] = []
    for cat in root.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        for test in cat.get("tests") or []:
            if not isinstance(test, dict):
                continue  # 3.x writes null between tests
            for res in test.get("results") or []:
                if isinstance(res, dict):
                    out.extend(_records(src, len(out), cat.get("category"), test, res, version, driver, layout))
    if not out:
        src.fail(None, f"a dcgmi diag document (DCGM {version or '?'}) with no test result: the diagnostic "
                       f"produced nothing to judge")
    return out


def _records(src: Source, n: int, category: Any, test: dict[str, Any], res: dict[str, Any], version: Any,
             driver: Any, layout: str) -> list[dict[str, Any]]:
    status = str(res.get("status", "")).strip().lower()
    result = _RESULT.get(status)
    if result is None:
        src.warn(None, f"test {test.get('name')!r}: status {res.get('status')!r} is not one DCGM documents; "
                       f"read as 'not run' (never as a pass)")
        result = "not run"
    errors = []
    for w in _list(res.get("warnings")) + _list(res.get("errors")):
        if isinstance(w, dict):
            e = {"error_id": w.get("error_id"), "category": w.get("error_category"),
                 "severity": w.get("error_severity"), "message": w.get("warning") or w.get("error")}
            e["category_name"] = CATEGORY.get(e["category"]) if isinstance(e["category"], int) else None
            e["severity_name"] = SEVERITY.get(e["severity"]) if isinstance(e["severity"], int) else None
            errors.append({k: v for k, v in e.items() if v is not None})
        elif isinstance(w, str):
            errors.append({"message": w})
    info = [str(x) for x in _list(res.get("info"))]
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    figures = [f for line in info + [str(x) for x in _list(summary.get("info"))] for f in figures_of(line)]
    if "entity_id" in res:
        entities = [(str(res.get("entity_group") or "GPU"), res.get("entity_id"))]
    else:  # 3.x: gpu_ids is one int or "0,1,2" (one result shared by those GPUs)
        ids = [int(x) for x in re.findall(r"\d+", str(res.get("gpu_ids", "")))]
        entities = [("GPU", i) for i in ids] or [("GPU", None)]
    out = []
    for k, (group, eid) in enumerate(entities):
        context = src.header("diag", n + k, tool=TOOL, tool_version=str(version) if version else None, line=None)
        extra = {"layout": layout, "driver_version": driver, "status_printed": res.get("status"),
                 "summary_status": summary.get("status"), "summary_info": _list(summary.get("info")) or None,
                 "shared_by": len(entities) if len(entities) > 1 else None}
        out.append(DiagRecord(test=str(test.get("name")), result=result, category=category, entity_group=group,
                               entity_id=eid if isinstance(eid, int) else None, errors=errors, info=info,
                               figures=figures, dcgm_version=str(version) if version else None,
                               extra={x: v for x, v in extra.items() if v is not None}, context=context).to_dict())
    return out


def _list(v: Any) -> list[Any]:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def figures_of(line: str) -> list[dict[str, Any]]:
    """'GPU 0 GPU to Host bandwidth:\\t\\t24.02 GB/s, ...' -> [{name, value, unit}, ...] (as stated, never derived)."""
    out = []
    for part in line.split(","):
        m = _FIGURE.search(part.replace("\t", " "))
        if m:
            name = re.sub(r"^GPU \d+ ", "", m.group(1).strip())
            out.append({"name": name or m.group(3), "value": float(m.group(2)), "unit": m.group(3)})
    return out
