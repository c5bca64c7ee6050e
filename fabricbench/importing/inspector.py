"""NCCL Inspector's JSON output (formats v4.0 to v4.3, plain and verbose, .gz) -> collective records of a job.

    fabricbench import nccl-inspector-1234/host-pid4242.log --out job.jsonl
    fabricbench jobfit --job nccl-inspector-1234/ --sweep sweep.jsonl

The Inspector (an NCCL profiler plugin, NCCL >= 2.28.3) writes one JSON object per completed collective,
per communicator, to `<dir>/<host>-pid<pid>.log`. What changed between versions, and how it is read:
- v4.0: every object carries `header` (comm id, rank, n_ranks, nnodes), `metadata` (format version,
  hostname, pid, dump time) and `coll_perf` (coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us,
  coll_timing_source, coll_algobw_gbs, coll_busbw_gbs; verbose adds event traces);
- v4.1: a `dump_stats` object per communicator per dump counts the records the ring dropped;
- v4.2: `coll_algo`, `coll_proto` (and `comm_name` in the header);
- v4.3: the `dump_stats` marker carries header and metadata once; the `coll_records + p2p_records +
  proxy_records` objects after it have no header of their own (they take the marker's);
- one agent writes `coll_exec_time_us` as a float (5663.0): read as a number like any other.
Objects may be one per line or pretty-printed over several: they are read one after another.

S convention (docs/domain.md, nccl-tests'): the Inspector's coll_msg_size_bytes is NCCL's count x type size, which
for AllGather and ReduceScatter is the *per-rank* part (its own bandwidth code multiplies by n_ranks). A record
here holds S = coll_msg_size_bytes x n_ranks for those two (all-gather: the gathered output; reduce-scatter:
the input), and coll_msg_size_bytes itself for AllReduce, Broadcast and Reduce; `extra.msg_size_bytes` keeps
the printed figure and `extra.inferred` names "bytes" where it was converted. algbw and busbw are kept as the
Inspector printed them (its formulas are nccl-tests' and agree with S / t). Each record is one call of one
rank: `extra.observed` is "job", and the job-against-fabric command (relating/jobfit.py) groups them.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator
from typing import Any

from fabricbench.collectives import busbw_factor
from fabricbench.importing import stream
from fabricbench.importing.base import Source, number
from fabricbench.importing.inspector_common import OP_NAMES, s_of_msg, version_tuple
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status

TOOL = "nccl-inspector"
TIMING_RULE = "NCCL Inspector: one call's execution time on one rank ({source})"


def sniff(text: str) -> bool:
    head = text[:65536]
    return '"inspector_output_format_version"' in head or bool(re.search(r'^\s*\{\s*"coll_perf"\s*:', head, re.M))


OBJECT_CAP = 1 << 20  # bytes one Inspector object may take (a verbose one with its event trace: ~10 KB)
_NONSPACE = re.compile(r"\S")


def objects(src: Source) -> Iterator[tuple[int, Any]]:
    """(line, object) for each JSON object, gathered line by line (one per line, or pretty-printed over
    several); what does not parse is warned about and skipped."""
    dec, buf, start = json.JSONDecoder(), "", 0
    for line_no, line in src.lines(longest=None):  # one object per line may be long: OBJECT_CAP bounds it
        if not buf:
            if not line.strip():
                continue
            start = line_no
        buf = f"{buf}\n{line}" if buf else line
        if len(buf) > OBJECT_CAP:
            src.warn(start, f"skipped over {OBJECT_CAP >> 20} MiB of text that is not one Inspector JSON object")
            buf = ""
            continue
        if line.rstrip().endswith("}"):
            buf, start = yield from _decoded(src, dec, buf, start)
    if buf.strip():
        src.warn(start, "skipped text that is not an Inspector JSON object (cut short)")


def _decoded(src: Source, dec: json.JSONDecoder, text: str, start: int):
    """The objects in `text` (yielded); returns what is left (an object not complete yet) and its line."""
    if stream.depth(text) > stream.MAX_DEPTH:
        src.fail(start, f"JSON nested deeper than {stream.MAX_DEPTH}; an Inspector object nests 4: not a file the "
                        f"Inspector wrote")
    at = 0
    while True:
        m = _NONSPACE.search(text, at)
        if m is None:
            return "", 0
        at = m.start()
        line = start + text.count("\n", 0, at)
        try:
            obj, at = dec.raw_decode(text, at)
        except json.JSONDecodeError as e:
            if e.pos >= len(text):  # the object goes on below
                return text[at:], line
            src.warn(line, f"skipped text that is not an Inspector JSON object ({e.msg})")
            nxt = text.find("\n{", at + 1)
            if nxt < 0:
                return "", 0
            at = nxt + 1
            continue
        yield line, obj


class _Context:
    """The v4.3 marker's header and metadata, and how many records it announced, per kind."""

    def __init__(self, src: Source):
        self.src, self.header, self.metadata, self.left, self.line = src, None, None, {}, 0
        self.dropped: dict[str, int] = {}  # comm id -> collective records the ring dropped (cumulative)

    def marker(self, line: int, obj: dict[str, Any]) -> None:
        self.close()
        stats = obj.get("dump_stats") if isinstance(obj.get("dump_stats"), dict) else {}
        comm = str((obj.get("header") or {}).get("id"))
        dropped = stats.get("coll_dropped_total")
        if isinstance(dropped, int) and dropped > 0:
            self.dropped[comm] = max(self.dropped.get(comm, 0), dropped)
        if version_tuple((obj.get("metadata") or {}).get("inspector_output_format_version")) >= (4, 3):
            self.header, self.metadata, self.line = obj.get("header"), obj.get("metadata"), line
            self.left = {k: stats.get(f"{k}_records") or 0 for k in ("coll", "p2p", "proxy")}

    def restore(self, line: int, obj: dict[str, Any]) -> dict[str, Any] | None:
        if "header" in obj and "metadata" in obj:
            return obj
        if self.header is None:
            self.src.warn(line, "skipped an Inspector record without header that follows no v4.3 dump_stats "
                                "marker (its communicator and process are unknown)")
            return None
        kind = "coll" if "coll_perf" in obj else "p2p" if "p2p_perf" in obj else "proxy"
        self.left[kind] = self.left.get(kind, 0) - 1
        return {"header": self.header, "metadata": self.metadata, **obj}

    def close(self) -> None:
        short = {k: n for k, n in self.left.items() if n > 0}
        if short:
            said = ", ".join(f"{n} {k}" for k, n in short.items())
            self.src.warn(self.line, f"the v4.3 dump_stats marker announced more records than followed it "
                                     f"({said} record(s) missing): the dump is truncated")
        self.header, self.metadata, self.left = None, None, {}


def read(src: Source) -> Iterator[dict[str, Any]]:
    ctx = _Context(src)
    runs: dict[tuple, int] = {}
    skipped = {"p2p": 0, "proxy": 0}
    for line, obj in objects(src):
        if not isinstance(obj, dict):
            src.warn(line, "skipped a JSON value that is not an object")
            continue
        if "dump_stats" in obj:
            ctx.marker(line, obj)
            continue
        rec = ctx.restore(line, obj)
        if rec is None:
            continue
        if "coll_perf" not in rec:
            skipped["p2p" if "p2p_perf" in rec else "proxy"] += 1
            continue
        r = _collective(src, line, rec, runs)
        if r is not None:
            yield r
    ctx.close()
    for comm, n in ctx.dropped.items():
        src.warn(None, f"communicator {comm}: the Inspector dropped {n} collective record(s) (ring buffer "
                       f"overwritten before a dump): the calls read are a sample, not all of them")
    if skipped["p2p"]:
        src.warn(None, f"{skipped['p2p']} point-to-point record(s) (p2p_perf) left out: only collectives are read")
    if skipped["proxy"]:
        src.warn(None, f"{skipped['proxy']} proxy_trace record(s) left out (network-progress detail, not a call)")


def _collective(src: Source, line: int, rec: dict[str, Any], runs: dict[tuple, int]) -> dict[str, Any] | None:
    head, meta, perf = rec.get("header") or {}, rec.get("metadata") or {}, rec["coll_perf"]
    if not isinstance(perf, dict) or not isinstance(head, dict) or not isinstance(meta, dict):
        src.warn(line, "skipped an Inspector record whose header, metadata or coll_perf is not an object")
        return None
    name = str(perf.get("coll"))
    op = OP_NAMES.get(name.lower())
    n = head.get("n_ranks") if isinstance(head.get("n_ranks"), int) and head["n_ranks"] > 0 else None
    t = number(str(perf.get("coll_exec_time_us")))
    msg = perf.get("coll_msg_size_bytes")
    if t is None or t <= 0 or not isinstance(msg, int) or msg < 0:
        src.warn(line, f"skipped {name} coll_sn {perf.get('coll_sn')}: execution time {perf.get('coll_exec_time_us')!r} "
                       f"or size {msg!r} is not a positive figure")
        return None
    nbytes, rule, inferred = s_of_msg(op, msg, n)
    comm, rank, pid, host = head.get("id"), head.get("rank"), meta.get("pid"), meta.get("hostname")
    run = runs.setdefault((comm, rank, pid, host), len(runs))
    version = meta.get("inspector_output_format_version")
    stamp = meta.get("dump_timestamp_us")
    when = (datetime.datetime.fromtimestamp(stamp / 1e6, datetime.timezone.utc).isoformat(timespec="seconds")
            if isinstance(stamp, int) and 0 < stamp < 4e15 else None)
    context = src.header("collective", run, tool=TOOL, tool_version=version, line=line,
                         host=host if isinstance(host, str) else None, timestamp=when)
    source_timing = perf.get("coll_timing_source")
    factor = busbw_factor(op, n)
    extra = {k: v for k, v in {
        "observed": "job", "coll": name, "coll_sn": perf.get("coll_sn"), "timing_source": source_timing,
        "comm_hash": comm, "comm_name": head.get("comm_name"), "rank": rank, "pid": pid, "nnodes": head.get("nnodes"),
        "msg_size_bytes": msg, "s_rule": rule, "inferred": inferred or None, "git_rev": meta.get("git_rev") or None,
        "rec_mechanism": meta.get("rec_mechanism"), "verbose": "event_trace_ts" in perf or None,
        "exec_time_printed_as": "float" if isinstance(perf.get("coll_exec_time_us"), float) else None,
    }.items() if v is not None}
    r = CollectiveResult(
        op=op or name.lower(), dtype=None, bytes=nbytes, requested_bytes=None, count=None, nranks=n, gpus=[],
        inplace=None, graph=None, iters=1, time_us=t, mean_us=t, min_us=t, max_us=t, p95_us=None, cv=None,
        ci95_rel=None, algbw_gbps=number(str(perf.get("coll_algobw_gbs"))),
        busbw_gbps=number(str(perf.get("coll_busbw_gbs"))), busbw_factor=factor,
        busbw_note="n = 1: busbw factor is 0, busbw not meaningful" if n == 1 else None, wrong=None,
        status=Status.OK, engine=TOOL, backend="nccl",
        timing_rule=TIMING_RULE.format(source=source_timing or "timing source not printed"),
        nccl_algo=perf.get("coll_algo"), nccl_proto=perf.get("coll_proto"), extra=extra, context=context)
    return r.to_dict()
