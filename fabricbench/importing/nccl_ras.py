"""NCCL RAS (`ncclras`, NCCL >= 2.24; JSON since 2.28.7) -> `health` records, one per communicator.

    ncclras -f json > ras.json; fabricbench import ras.json --out node.jsonl
    fabricbench qualify --spec builtin:h200-sxm-8 --from node.jsonl

JSON (`communicators[]`: hash, size, ranks_count, missing_ranks_count, ranks[] with host, pid, cuda_dev,
nvml_dev, status and collective_counts, missing_ranks[] with unresponsive / considered_dead): the reader
lists each missing rank (and which are dead), each error flag a rank raised, and, where ranks of one
communicator launched different numbers of an operation, a mismatch with its counts and the ranks in the
minority. RAS's JSON does not name a mismatch itself: it is deduced from the counts, and the record says so
(`extra.inferred: ["mismatch"]`).

NCCL 2.28.x writes malformed JSON for a missing rank: no comma after `"nvml_dev": N` (fixed in 2.29.2).
The reader inserts the missing commas, reads the document, and warns that it did.
Text (every release): see nccl_ras_text.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from fabricbench.importing.base import Source
from fabricbench.importing.nccl_ras_text import read_text
from fabricbench.results.health import HealthRecord

TOOL = "ncclras"
# a value ends a line and the next line opens a key: the comma NCCL 2.28.x left out
_NO_COMMA = re.compile(r'([0-9"el\]}])(\s*\n\s*"[A-Za-z_]+"\s*:)')

# a pasted excerpt: an "Errors" or "Warnings" heading (underlined with '=') and one of RAS's blocks under it
_EXCERPT = re.compile(r"(?m)^(?:Errors|Warnings)\s*\n=+\s*\n\s*\n?(?:#\d+-\d+ \([0-9a-fA-F]+\) [A-Z,]+|INCOMPLETE|DEAD"
                      r"|TIMEOUT)\s*$")


def sniff(text: str) -> bool:
    head = text[:65536]
    return ('"communicators_count"' in head and '"communicators"' in head) or bool(
        re.search(r"(?m)^Group +Comms +Nodes +Ranks", head) and "NCCL version" in head) or bool(_EXCERPT.search(head))


def read(src: Source) -> list[dict[str, Any]]:
    body = src.text[src.text.find("{"):] if "{" in src.text else ""
    if not body.lstrip().startswith("{") or '"communicators"' not in body:
        return read_text(src)
    try:
        doc = src.loads(body)
    except json.JSONDecodeError:
        fixed = _NO_COMMA.sub(r"\1,\2", body)
        try:
            doc = src.loads(fixed)
        except json.JSONDecodeError as e:
            src.fail(e.lineno, f"not readable as ncclras JSON ({e.msg}), even after adding the commas NCCL 2.28.x "
                               f"leaves out")
        src.warn(None, "repaired malformed JSON: NCCL 2.28.x leaves out the comma after \"nvml_dev\" in "
                       "missing_ranks (fixed in NCCL 2.29.2); read with the commas added")
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        src.fail(None, "ncclras JSON without a communicators list")
    version = doc.get("nccl_version") if isinstance(doc.get("nccl_version"), str) else None
    out = []
    for i, comm in enumerate(doc["communicators"]):
        if isinstance(comm, dict):
            out.append(_comm(src, i, comm, version, doc.get("timestamp")))
    ras = doc.get("ras") if isinstance(doc.get("ras"), dict) else {}
    if ras.get("timeouts_count"):
        src.warn(None, f"RAS met {ras['timeouts_count']} communication timeout(s) while gathering: its view may "
                       f"be incomplete")
        # NCCL's TIMEOUT (a Warnings block in its text report): about the job, not one communicator
        timeout = {"kind": "timeout", "nccl": ["timeout"],
                   "detail": f"RAS met {ras['timeouts_count']} communication timeout(s) while gathering: "
                             f"its view may be incomplete"}
        context = src.header("health", len(out), tool=TOOL, tool_version=version, line=None)
        out.append(HealthRecord(check=TOOL, healthy=False, findings=[timeout], nccl_version=version,
                                context=context).to_dict())
    if not out:
        src.fail(None, f"ncclras JSON lists no communicator (communicators_count {doc.get('communicators_count')}): "
                       f"nothing to report")
    return out


def _words(r: dict[str, Any]) -> list[str]:
    """NCCL's status words for a missing rank, from its JSON flags (`unresponsive`, `considered_dead`)."""
    st = r.get("status") if isinstance(r.get("status"), dict) else {}
    return [w for w, k in (("unresponsive", "unresponsive"), ("dead", "considered_dead")) if st.get(k)]


def _who(r: dict[str, Any]) -> dict[str, Any]:
    return {"rank": r.get("rank"), "host": r.get("host"), "pid": r.get("pid"), "gpu": r.get("cuda_dev"),
            "nvml_gpu": r.get("nvml_dev")}


def _comm(src: Source, i: int, comm: dict[str, Any], version: str | None, stamp: Any) -> dict[str, Any]:
    ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
    missing = [r for r in comm.get("missing_ranks") or [] if isinstance(r, dict)]
    findings: list[dict[str, Any]] = []
    if missing:
        # NCCL's own words for each missing rank (its status flags): an unresponsive rank may still be
        # alive (a hang, a slow node), a dead one is gone (a crash, a lost node); an operator acts differently
        words = list(dict.fromkeys(w for r in missing for w in _words(r)))
        findings.append({"kind": "missing", "nccl": words or ["missing"],
                         "detail": f"{len(missing)} rank(s) sent no data"
                                   + (f" (NCCL: {', '.join(words)})" if words else ""),
                         "ranks": [{**_who(r), "nccl_status": _words(r)} for r in missing]})
        for word, kind in (("unresponsive", "unresponsive"), ("dead", "dead")):
            hit = [r for r in missing if word in _words(r)]
            if hit:
                findings.append({"kind": kind, "nccl": [word],
                                 "detail": f"{len(hit)} rank(s) NCCL calls {word}"
                                           + (" (considered dead)" if word == "dead" else ""),
                                 "ranks": [_who(r) for r in hit]})
    errs = [r for r in ranks if any((r.get("status") or {}).get(k) for k in ("async_error", "init_state",
                                                                               "abort_flag"))]
    if errs:
        findings.append({"kind": "error", "nccl": ["error"], "detail": f"{len(errs)} rank(s) report an error, init failure or abort",
                         "ranks": [{**_who(r), "status": r.get("status")} for r in errs]})
    inferred = []
    ops = sorted({op for r in ranks for op in (r.get("collective_counts") or {})})
    for op in ops:
        counts = Counter(int((r.get("collective_counts") or {}).get(op, 0)) for r in ranks)
        if len(counts) > 1:
            usual = counts.most_common(1)[0][0]
            odd = [r for r in ranks if int((r.get("collective_counts") or {}).get(op, 0)) != usual]
            findings.append({"kind": "mismatch", "op": op, "nccl": ["mismatch"],
                             "detail": f"ranks launched different numbers of {op}: "
                                       + ", ".join(f"{n} rank(s) at {v}" for v, n in sorted(counts.items())),
                             "counts": {str(v): n for v, n in sorted(counts.items())},
                             "ranks": [{**_who(r), "count": (r.get("collective_counts") or {}).get(op)} for r in odd]})
            inferred.append("mismatch")
    hosts = sorted({str(r.get("host")) for r in ranks + missing if r.get("host") is not None})
    context = src.header("health", i, tool=TOOL, tool_version=version, line=None,
                         host=hosts[0] if len(hosts) == 1 else None,
                         timestamp=stamp if isinstance(stamp, str) else None)
    extra = {"hosts": hosts, "secondary_hash": comm.get("secondary_hash"),
             "missing_ranks_count": comm.get("missing_ranks_count")}
    if inferred:
        extra["inferred"] = sorted(set(inferred))
    return HealthRecord(check=TOOL, healthy=not findings, comm_hash=str(comm.get("hash")), nranks=comm.get("size") or None,
                        ranks_reporting=comm.get("ranks_count"), findings=findings, nccl_version=version,
                        extra=extra, context=context).to_dict()
