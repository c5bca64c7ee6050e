"""NCCL RAS's text report (`ncclras`, every release since 2.24) -> `health` records.

    ncclras > ras.txt; fabricbench import ras.txt --out node.jsonl

The report's communicator table has one row per group of alike communicators (group #, comms in group,
nodes per comm, ranks per node, ranks per comm, ranks in group, status, errors); its Errors and Warnings
sections hold blocks `#G-C (hash) KIND` (one communicator) or a bare `INCOMPLETE` / `DEAD` / `TIMEOUT`
(the whole job), each followed by indented lines naming ranks ("Rank 12 -- GPU 4 managed by process 323032
on node 10.137.190.124") or processes ("Process 60004 on node 10.4.109.13 managing GPU 0") and counts
("30 ranks have launched up to operation 640"). One record per table row, with the findings of the blocks
that name its group; one more (comm_hash null) for job-level blocks.
"""

from __future__ import annotations

import re
from typing import Any

from fabricbench.importing.base import Source
from fabricbench.results.health import HealthRecord

TOOL = "ncclras"
_VERSION = re.compile(r"^NCCL version (\S+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([A-Z,]+)\s+([A-Z,]+)\s*$")
_BLOCK = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) ([A-Z,]+)\s*$")
_JOB = re.compile(r"^(INCOMPLETE|DEAD|TIMEOUT)\s*$")
_RANK = re.compile(r"Rank (\d+)(?: has launched up to operation (\d+)| has not launched any operations"
                   r"| has status (\S+)| reported (.+?))? -- (?:GPU (\S+) managed by process (\d+) on node (\S+)"
                   r"|\[process information not found\])")
_PROC = re.compile(r"Process (\d+) on node (\S+) managing GPUs? (.+?)\s*$")
_COUNT = re.compile(r"(\d+) ranks? (?:have|has) launched up to operation (\d+)")
_OPS = re.compile(r"different (\w+) operation counts")


def read_text(src: Source) -> list[dict[str, Any]]:
    version, rows, blocks, block = None, [], [], None
    for line_no, raw in src.lines():
        line = raw.rstrip()
        m = _VERSION.match(line)
        if m:
            version = m.group(1)
            continue
        m = _ROW.match(line)
        if m and block is None:
            rows.append((line_no, [int(x) for x in m.groups()[:6]], m.group(7), m.group(8)))
            continue
        m, j = _BLOCK.match(line), _JOB.match(line)
        if m or j:
            block = {"line": line_no, "group": int(m.group(1)) if m else None, "hash": m.group(3) if m else None,
                     "kinds": (m.group(4) if m else j.group(1)).split(","), "lines": []}
            blocks.append(block)
            continue
        if block is not None and line.startswith("  "):
            block["lines"].append(line.strip())
        elif not line.strip():
            block = None
    if not rows and not blocks:
        src.fail(None, "an ncclras report without its communicator table (no 'Group Comms ...' rows) and without "
                       "an Errors or Warnings block: RAS gathered no communicator data")
    if not rows:
        return _partial(src, version, blocks)
    out = []
    for i, (line_no, nums, status, errors) in enumerate(rows):
        group = nums[0]
        findings = [f for b in blocks if b["group"] == group for f in _findings(b)]
        out.append(_record(src, i, line_no, version, nums, status, errors, findings,
                           hashes=sorted({b["hash"] for b in blocks if b["group"] == group})))
    job = [f for b in blocks if b["group"] is None for f in _findings(b)]
    if job:
        out.append(_record(src, len(rows), blocks[0]["line"], version, None, None, None, job, hashes=[]))
    return out


def _partial(src: Source, version: str | None, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An excerpt (the Errors and Warnings sections, or Errors alone, as pasted into a ticket): one record
    per communicator its blocks name, one for the job-level blocks; the table's sizes stay unknown."""
    src.warn(blocks[0]["line"], "a partial ncclras report (no communicator table): communicator sizes unknown, "
                                "read from its Errors/Warnings blocks alone")
    out = []
    for h in dict.fromkeys(b["hash"] for b in blocks if b["hash"]):
        mine = [b for b in blocks if b["hash"] == h]
        out.append(_record(src, len(out), mine[0]["line"], version, None, None, None,
                           [f for b in mine for f in _findings(b)], hashes=[h], group=mine[0]["group"]))
    job = [f for b in blocks if b["group"] is None for f in _findings(b)]
    if job:
        out.append(_record(src, len(out), blocks[0]["line"], version, None, None, None, job, hashes=[]))
    return out


def _findings(block: dict[str, Any]) -> list[dict[str, Any]]:
    ranks, counts, ops = [], {}, []
    for text in block["lines"]:
        m = _RANK.search(text)
        if m:
            ranks.append({k: v for k, v in {"rank": int(m.group(1)), "count": int(m.group(2)) if m.group(2) else None,
                                            "status": m.group(3), "reported": m.group(4), "gpu": m.group(5),
                                            "pid": int(m.group(6)) if m.group(6) else None,
                                            "host": m.group(7)}.items() if v is not None})
            continue
        m = _PROC.search(text)
        if m:
            ranks.append({"pid": int(m.group(1)), "host": m.group(2), "gpu": m.group(3)})
            continue
        m = _COUNT.search(text)
        if m:
            counts[m.group(2)] = int(m.group(1))
        m = _OPS.search(text)
        if m:
            ops.append(m.group(1))
    out = []
    for kind in block["kinds"]:
        k = {"INCOMPLETE": "missing", "MISMATCH": "mismatch"}.get(kind, kind.lower())
        # NCCL's own word (INCOMPLETE, DEAD, MISMATCH, TIMEOUT, ERROR) kept beside ours
        f: dict[str, Any] = {"kind": k, "nccl": [kind.lower()], "detail": "; ".join(block["lines"][:2]),
                             "ranks": ranks}
        if block["hash"]:
            f["comm_hash"] = block["hash"]
        if k == "mismatch":
            f.update(counts=counts, op=ops[0] if len(ops) == 1 else None, ops=ops or None)
        out.append({x: v for x, v in f.items() if v is not None})
    return out


def _record(src: Source, i: int, line: int, version: str | None, nums: list[int] | None, status: str | None,
            errors: str | None, findings: list[dict[str, Any]], *, hashes: list[str],
            group: int | None = None) -> dict[str, Any]:
    hosts = sorted({r["host"] for f in findings for r in f.get("ranks", []) if r.get("host")})
    extra: dict[str, Any] = {"hosts": hosts}
    if group is not None:
        extra.update(group=group, partial=True)
    if nums is not None:
        extra.update(group=nums[0], comms_in_group=nums[1], nodes_per_comm=nums[2], ranks_per_node=nums[3],
                     ranks_in_group=nums[5], status=status, errors=errors)
    healthy = not findings and errors in ("OK", None)
    if not findings and errors not in ("OK", None):  # the table says so, no block detailed it
        findings = [{"kind": {"INCOMPLETE": "missing"}.get(e, e.lower()), "nccl": [e.lower()],
                     "detail": f"RAS table: {errors}"} for e in errors.split(",")]
        healthy = False
    context = src.header("health", i, tool=TOOL, tool_version=version, line=line,
                         host=hosts[0] if len(hosts) == 1 else None)
    return HealthRecord(check=TOOL, healthy=healthy, comm_hash=hashes[0] if len(hashes) == 1 else None,
                        nranks=(nums[4] or None) if nums else None, ranks_reporting=None, findings=findings,
                        nccl_version=version, extra=extra, context=context).to_dict()
