"""NCCL Inspector's Prometheus textfile (NCCL >= 2.29.2, NCCL_INSPECTOR_PROM_DUMP=1) -> bucketed collective records.

    fabricbench import /var/lib/node_exporter/nccl_inspector/nccl_inspector_metrics_GPU-0a1b.prom --out job.jsonl

One file per GPU, rewritten at each dump. Each series is one (communicator, collective, size bucket,
algo_proto) on one GPU:
- `nccl_bus_bandwidth_gbs`: the geometric mean of the calls' busbw in the bucket (inspector_prom.cc sums logs);
- `nccl_collective_exec_time_microseconds`: the arithmetic mean of their execution times;
- `message_size` is a bucket of the printed (per-rank for AllGather/ReduceScatter) size, [L, L+1) x 1024^k B.
A record here is one bucket, never one call: `extra.bucket` is true, `bytes` is null (no one size was run) and
`extra.bytes_range` holds the bucket converted to S (inspector_common.s_of_msg); the labels are kept in
`extra.labels`; `algo_proto` ("Ring_ll", "RING_SIMPLE") gives nccl_algo / nccl_proto. P2P series are left out.
"""

from __future__ import annotations

import re
from typing import Any

from fabricbench.collectives import busbw_factor
from fabricbench.importing.base import Source, number
from fabricbench.importing.inspector_common import OP_NAMES, bucket_bytes, s_of_msg
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status

TOOL = "nccl-inspector-prom"
BUSBW, TIME = "nccl_bus_bandwidth_gbs", "nccl_collective_exec_time_microseconds"
_LINE = re.compile(r'^(nccl_[a-z0-9_]+)\{(.*)\}\s+(\S+)\s*$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def sniff(text: str) -> bool:
    return bool(re.search(r"(?m)^nccl_(?:bus_bandwidth_gbs|collective_exec_time_microseconds)\{", text[:65536]))


def read(src: Source) -> list[dict[str, Any]]:
    series: dict[tuple, dict[str, Any]] = {}
    p2p = 0
    for line_no, raw in src.lines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            src.warn(line_no, "skipped a line that is not a Prometheus sample of the Inspector")
            continue
        name, labels = m.group(1), dict(_LABEL.findall(m.group(2)))
        if name.startswith("nccl_p2p_"):
            p2p += 1
            continue
        if name not in (BUSBW, TIME):
            continue
        value = number(m.group(3))
        key = tuple(sorted(labels.items()))
        s = series.setdefault(key, {"labels": labels, "line": line_no})
        s[name] = value
    if p2p:
        src.warn(None, f"{p2p} point-to-point sample(s) left out: only collectives are read")
    return [r for i, s in enumerate(series.values()) if (r := _record(src, i, s)) is not None]


def _record(src: Source, run: int, s: dict[str, Any]) -> dict[str, Any] | None:
    labels, line = s["labels"], s["line"]
    op = OP_NAMES.get(labels.get("collective", "").lower())
    n = int(labels["nranks"]) if labels.get("nranks", "").isdigit() and int(labels["nranks"]) > 0 else None
    printed = bucket_bytes(labels.get("message_size", ""))
    t, busbw = s.get(TIME), s.get(BUSBW)
    if t is not None and t <= 0:
        t = None
    if printed is None or (t is None and busbw is None):
        src.warn(line, f"skipped a bucket without a readable size or figure ({labels.get('message_size')!r})")
        return None
    lo, rule, inferred = s_of_msg(op, printed[0], n)
    hi = s_of_msg(op, printed[1], n)[0]
    algo, _, proto = labels.get("algo_proto", "").partition("_")
    context = src.header("collective", run, tool=TOOL, tool_version=labels.get("version"), line=line,
                         host=labels.get("node"))
    extra = {"observed": "job", "bucket": True, "bytes_range": [lo, hi] if lo is not None else None,
             "s_rule": rule, "inferred": inferred or None, "labels": labels,
             "aggregate": "busbw: geometric mean over the bucket's calls; time: arithmetic mean",
             "comm_name": labels.get("comm_name"), "gpu": labels.get("gpu"), "nnodes": labels.get("n_nodes")}
    r = CollectiveResult(
        op=op or labels.get("collective", "").lower() or None, dtype=None, bytes=None, requested_bytes=None,
        count=None, nranks=n, gpus=[], inplace=None, graph=None, iters=None, time_us=t, mean_us=t, min_us=None,
        max_us=None, p95_us=None, cv=None, ci95_rel=None, algbw_gbps=None, busbw_gbps=busbw,
        busbw_factor=busbw_factor(op, n), busbw_note=None, wrong=None, status=Status.OK, engine=TOOL,
        backend="nccl", timing_rule="NCCL Inspector Prometheus bucket: mean of the calls in one size bucket",
        nccl_algo=algo or None, nccl_proto=proto or None, extra={k: v for k, v in extra.items() if v is not None},
        context=context)
    return r.to_dict()
