"""NCCL's active diagnostics (`NCCL_RUN_DIAGNOSTICS=1`, NCCL >= 2.31) -> `health` records, one per report.

    NCCL_RUN_DIAGNOSTICS=1 all_reduce_perf -b 8 -e 8G -f 2 -g 8 > ar.log
    fabricbench import ar.log --out node.jsonl          (the table's collective records and the report's health)
    fabricbench qualify --spec my.toml --from node.jsonl      ([[check]] kind = "nccl_diag")

At every communicator's init, the process of rank 0 prints a report to stdout, each line
`<host>:<pid> NCCL DIAG ...` (NCCL's src/diagnostics.cc, src/diagnostics/p2p.cc and its ib_write_bw check;
docs/troubleshooting/diagnostics.rst). What is read, line by line:
- `=== NCCL Diagnostics ===` opens a report; `NCCL diagnostics completed in X ms across N ranks` closes it;
- the P2P summary: `[OK]   p2p: all N directed GPU P2P edges verified`, `[INFO] p2p: P/T directed GPU P2P
  edges verified`, either with `(skipped indirect=K)`; the docs' wording `verified P2P access in both
  directions between every GPU pair (N peer accesses)` and `only P/T GPU-to-GPU peer accesses passed
  verification` is read too;
- a failed edge: `[INFO] p2p: write mismatch srcRank=.. srcCudaDev=.. ... path=NVL handle=..; advice` (and
  read mismatch, peer-memory import failed, topology check failed, ...): a finding naming both GPUs, the
  path and NCCL's advice;
- network bandwidth: `[OK] net bw: min/median/max Gbit/s min/median/max same-nic bw (across N ranks) in comm
  0x..` (and cross-nic), a rank >30% off the median, a pair that failed (`mode=same server_rank=... tool
  run timed out`), a check that ran out of time;
- any other `[INFO]` line: a finding with NCCL's words.
NCCL calls a report informational ([INFO] may be a notice): every [INFO] line is kept as a finding, and
the qualify check (qualifying/checks/nccl_diag.py) judges the figures against a spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fabricbench.importing.base import Source, strip_prefix
from fabricbench.results.health import HealthRecord

TOOL = "nccl-diag"
_LINE = re.compile(r"(?:^|\s)(?:(?P<host>[^\s:]+):(?P<pid>\d+) )?NCCL DIAG (?P<body>.*?)\s*$")
_TAG = re.compile(r"^\[(OK|INFO)\]\s+")
_VERSION = re.compile(r"NCCL (?:INFO )?(?:NCCL )?version (\d+\.\d+\.\d+)")
_DONE = re.compile(r"^NCCL diagnostics completed in ([\d.]+) ms across (\d+) ranks?")
_P2P_SUM = re.compile(r"^p2p: (?:all (\d+)|(\d+)/(\d+)) directed GPU P2P edges verified"
                      r"(?: \(skipped indirect=(\d+)\))?")
_P2P_DOCS_OK = re.compile(r"^p2p: verified P2P access in both directions between every GPU pair \((\d+) peer")
_P2P_DOCS_PART = re.compile(r"^p2p: only (\d+)/(\d+) GPU-to-GPU peer accesses passed verification")
_EDGE = re.compile(r"^p2p: (?P<what>[^=;]+?) srcRank=(?P<src>\d+) srcCudaDev=(?P<sdev>-?\d+) "
                   r"srcNvmlDev=(?P<snvml>-?\d+) dstRank=(?P<dst>\d+) dstCudaDev=(?P<ddev>-?\d+) "
                   r"dstNvmlDev=(?P<dnvml>-?\d+) path=(?P<path>\S+) handle=(?P<handle>\S+)(?P<rest>.*)$")
_NET_SUM = re.compile(r"^net bw: ([\d.]+)/([\d.]+)/([\d.]+) Gbit/s min/median/max (\S+) bw \(across (\d+) ranks?\)"
                      r"(?: in comm (0x[0-9a-fA-F]+))?")
_NET_OUT = re.compile(r"^net bw: (\S+) rank (\d+) \(([^)]*)\): ([\d.]+) Gbit/s, >30% off median ([\d.]+) Gbit/s")
_NET_MORE = re.compile(r"^net bw: (\S+): (\d+) more ranks >30% off median")
_NET_PAIR = re.compile(r"^net bw: mode=(\S+) server_rank=(\d+) server_host=(\S+) server_device=(\S+) "
                       r"client_rank=(\d+) client_host=(\S+) client_device=(\S+) (?:memory=(\S+) )?(.*?)"
                       r"(?: in comm 0x[0-9a-fA-F]+)?$")
_NET_TIME = re.compile(r"^net bw: test unable to complete in allocated time; ran (\d+) of (\d+) test phases")
_COMM = re.compile(r" in comm (0x[0-9a-fA-F]+)\s*$")


def sniff(text: str) -> bool:
    return bool(re.search(r"NCCL DIAG (?:=== NCCL Diagnostics ===|\[(?:OK|INFO)\]|NCCL diagnostics completed)",
                          text[:4 << 20]))


@dataclass(kw_only=True)
class Report:
    line: int
    host: str | None = None
    pid: int | None = None
    comm: str | None = None
    nranks: int | None = None
    elapsed_ms: float | None = None
    header: bool = False
    p2p: dict[str, Any] = field(default_factory=dict)
    net: dict[str, dict[str, Any]] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    info_lines: int = 0


def read(src: Source) -> list[dict[str, Any]]:
    reports: list[Report] = []
    cur: Report | None = None
    version = None
    for line_no, raw in src.lines():
        line = strip_prefix(raw.rstrip("\r\n"))
        v = _VERSION.search(line)
        if v and version is None and "NCCL DIAG" not in line:
            version = v.group(1)
        m = _LINE.search(line)
        if not m:
            continue
        body = m.group("body")
        if body.startswith("=== NCCL Diagnostics ==="):
            cur = Report(line=line_no, header=True)
            reports.append(cur)
        elif cur is None or cur.elapsed_ms is not None:  # a line outside a report (an excerpt): a report of its own
            cur = Report(line=line_no)
            reports.append(cur)
        if m.group("host"):
            cur.host, cur.pid = cur.host or m.group("host"), cur.pid or int(m.group("pid"))
        _body(src, cur, line_no, body)
    if not reports:
        src.fail(None, "no `NCCL DIAG` line: not an NCCL_RUN_DIAGNOSTICS report")
    return [_record(src, i, r, version) for i, r in enumerate(reports)]


def _body(src: Source, rep: Report, line_no: int, body: str) -> None:
    done = _DONE.match(body)
    if done:
        rep.elapsed_ms, rep.nranks = float(done.group(1)), int(done.group(2))
        return
    t = _TAG.match(body)
    if not t:
        return  # the header
    tag, text = t.group(1), body[t.end():]
    c = _COMM.search(text)
    if c:
        rep.comm = rep.comm or c.group(1)
    if tag == "INFO":
        rep.info_lines += 1
    if text.startswith("p2p:"):
        _p2p(rep, tag, text, line_no)
    elif text.startswith("net bw:"):
        _net(rep, tag, text, line_no)
    elif tag == "INFO":
        rep.findings.append({"kind": "diag", "nccl": [text.split(":")[0]], "detail": text, "line": line_no})


def _p2p(rep: Report, tag: str, text: str, line_no: int) -> None:
    m = _P2P_SUM.match(text)
    if m:
        passed = int(m.group(1) or m.group(2))
        rep.p2p = {"passed": passed, "tested": int(m.group(1) or m.group(3)),
                   "skipped_indirect": int(m.group(4) or 0), "tag": tag}
        return
    m = _P2P_DOCS_OK.match(text)
    if m:
        rep.p2p = {"passed": int(m.group(1)), "tested": int(m.group(1)), "skipped_indirect": 0, "tag": tag}
        return
    m = _P2P_DOCS_PART.match(text)
    if m:
        rep.p2p = {"passed": int(m.group(1)), "tested": int(m.group(2)), "skipped_indirect": 0, "tag": tag}
        return
    m = _EDGE.match(text)
    if m:
        rest = m.group("rest")
        reason = re.search(r"\breason=(\w+)", rest)
        what = m.group("what").strip()
        advice = rest.split("; ", 1)[1].strip() if "; " in rest else None
        rep.findings.append({k: v for k, v in {
            "kind": "p2p", "nccl": [what], "reason": reason.group(1) if reason else what.replace(" ", "_"),
            "detail": f"{what}: rank {m.group('src')} (GPU {m.group('sdev')}) -> rank {m.group('dst')} "
                      f"(GPU {m.group('ddev')}) over {m.group('path')} ({m.group('handle')})",
            "path": m.group("path"), "handle": m.group("handle"), "advice": advice,
            "ranks": [{"rank": int(m.group("src")), "gpu": int(m.group("sdev")), "nvml_gpu": int(m.group("snvml")),
                       "role": "source", "host": rep.host},
                      {"rank": int(m.group("dst")), "gpu": int(m.group("ddev")), "nvml_gpu": int(m.group("dnvml")),
                       "role": "destination", "host": rep.host}],
            "line": line_no}.items() if v is not None})
        return
    if tag == "INFO":  # setup failed on rank N, check returned N, a notice: NCCL's words as they are
        words = text[len("p2p:"):].strip()
        rank = re.search(r"\bon rank (\d+)", words)
        rep.findings.append({k: v for k, v in {
            "kind": "p2p", "nccl": [re.split(r" (?:on rank|returned|\S+=)", words)[0]], "detail": words,
            "ranks": [{"rank": int(rank.group(1)), "host": rep.host}] if rank else None,
            "line": line_no}.items() if v is not None})


def _net(rep: Report, tag: str, text: str, line_no: int) -> None:
    m = _NET_SUM.match(text)
    if m:
        rep.net[m.group(4)] = {"min_gbits": float(m.group(1)), "median_gbits": float(m.group(2)),
                               "max_gbits": float(m.group(3)), "ranks": int(m.group(5)), "tag": tag}
        return
    if text.startswith("net bw: skipped"):
        rep.net["skipped"] = {"tag": tag, "why": text[len("net bw: skipped"):].strip(" ()")}
        return
    m = _NET_OUT.match(text)
    if m:
        rep.findings.append({"kind": "net_bw_outlier", "nccl": [">30% off median"], "mode": m.group(1),
                             "gbits": float(m.group(4)), "median_gbits": float(m.group(5)),
                             "detail": f"{m.group(1)} rank {m.group(2)} ({m.group(3)}): {m.group(4)} Gbit/s, "
                                       f">30% off the median {m.group(5)} Gbit/s",
                             "ranks": [{"rank": int(m.group(2)), "host": m.group(3)}], "line": line_no})
        return
    m = _NET_MORE.match(text)
    if m:
        rep.findings.append({"kind": "net_bw_outlier", "nccl": [">30% off median"], "mode": m.group(1),
                             "more": int(m.group(2)), "detail": text[len("net bw: "):], "line": line_no})
        return
    m = _NET_PAIR.match(text)
    if m:
        rep.findings.append({k: v for k, v in {
            "kind": "net_bw", "nccl": [m.group(9)], "mode": m.group(1), "memory": m.group(8),
            "detail": f"{m.group(1)}-nic pair {m.group(3)} {m.group(4)} (rank {m.group(2)}, server) <- "
                      f"{m.group(6)} {m.group(7)} (rank {m.group(5)}, client): {m.group(9)}",
            "ranks": [{"rank": int(m.group(2)), "host": m.group(3), "device": m.group(4), "role": "server"},
                      {"rank": int(m.group(5)), "host": m.group(6), "device": m.group(7), "role": "client"}],
            "line": line_no}.items() if v is not None})
        return
    m = _NET_TIME.match(text)
    kind = "incomplete" if m else "net_bw"
    if tag == "INFO":
        rep.findings.append({"kind": kind, "nccl": [_COMM.sub("", text[len("net bw: "):]).split(";")[0]],
                             "detail": _COMM.sub("", text[len("net bw: "):]), "line": line_no})


def _record(src: Source, i: int, rep: Report, version: str | None) -> dict[str, Any]:
    findings = list(rep.findings)
    if rep.header and rep.elapsed_ms is None:
        # the report never finished (the process died, or the excerpt is cut): say so, it is not a pass
        findings.append({"kind": "incomplete", "nccl": ["no completed line"],
                         "detail": "the report has no 'NCCL diagnostics completed' line: cut short"})
    partial = rep.p2p and rep.p2p["passed"] < rep.p2p["tested"]
    if partial and not any(f["kind"] == "p2p" for f in findings):
        findings.append({"kind": "p2p", "nccl": ["edges not verified"],
                         "detail": f"only {rep.p2p['passed']}/{rep.p2p['tested']} directed GPU P2P edges verified"})
    extra: dict[str, Any] = {"p2p": rep.p2p or None, "net_bw": rep.net or None, "elapsed_ms": rep.elapsed_ms,
                             "pid": rep.pid, "complete": rep.elapsed_ms is not None}
    context = src.header("health", i, tool=TOOL, tool_version=version, line=rep.line, host=rep.host)
    return HealthRecord(check=TOOL, healthy=not findings, comm_hash=rep.comm, nranks=rep.nranks,
                        ranks_reporting=None, findings=findings, nccl_version=version,
                        extra={k: v for k, v in extra.items() if v is not None}, context=context).to_dict()
