"""An NCCL_DEBUG=INFO log on its own (a training job's output, NCCL_DEBUG_FILE) -> one transport record.

    NCCL_DEBUG=INFO torchrun ... 2> train.log && fabricbench import train.log --out imported.jsonl

The log is read by fabricbench/fabrics/transport.parse_nccl_log, the one parser of NCCL logs (compare uses
it too). The record (kind "transport") says which transports NCCL connected, whether NVLS was connected,
the network, rank and node counts and the NCCL version: whatever the log tells, null otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from fabricbench.fabrics.transport import parse_nccl_log
from fabricbench.importing.base import Source
from fabricbench.importing.nccl_tests_scan import LOG_CAP, LogLines

TOOL = "nccl"
_HOST = re.compile(r"^(?:\S*\])?\s*([^\s:\[\]]+):\d+:\d+ \[\d+\] NCCL INFO")
HOSTS_CAP = 4096  # host names kept (a job of more hosts keeps the first)


def sniff(text: str) -> bool:
    return "NCCL INFO" in text or bool(re.search(r"NCCL version \d", text))


def read(src: Source) -> list[dict[str, Any]]:
    log, first, hosts = LogLines(), None, {}
    for line_no, line in src.lines():
        if "NCCL" not in line:
            continue
        first = first or line_no
        log.append(line)
        m = _HOST.match(line)
        if m and len(hosts) < HOSTS_CAP:
            hosts[m.group(1)] = None
    s = parse_nccl_log(log.text())
    s.log_lines += log.dropped
    if log.dropped_lines:
        src.warn(None, f"read the first {LOG_CAP >> 20} MiB of NCCL lines (where NCCL names its transports, at "
                       f"set-up); {log.dropped_lines} later line(s) counted, not read")
    if not s.log_lines and not s.nccl_version:
        src.fail(None, "no NCCL INFO line in it")
    hosts = list(hosts)
    nranks = src.ranks(s.nranks, first)
    head = src.header("transport", 0, tool=TOOL, tool_version=s.nccl_version, line=first,
                      host=hosts[0] if len(hosts) == 1 else None)
    detail = s.to_dict()
    detected = bool(s.connections or s.nranks or s.nnodes)  # the log reached communicator set-up
    return [{**head, "transport": s.label(nranks), "transports": s.transports, "connections": s.connections,
             "nranks": nranks, "nnodes": s.nnodes, "local_ranks": s.local_ranks, "network": s.network,
             "gdrdma": s.gdrdma, "nvls": s.nvls if detected or s.nvls else None,
             "nvls_available": s.nvls_available, "nccl_version": s.nccl_version, "engine": None,
             "hosts": hosts, "log_lines": detail["log_lines"]}]
