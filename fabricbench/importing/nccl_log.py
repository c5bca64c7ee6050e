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

TOOL = "nccl"
_HOST = re.compile(r"^(?:\S*\])?\s*([^\s:\[\]]+):\d+:\d+ \[\d+\] NCCL INFO", re.MULTILINE)


def sniff(text: str) -> bool:
    return "NCCL INFO" in text or bool(re.search(r"NCCL version \d", text))


def read(src: Source) -> list[dict[str, Any]]:
    s = parse_nccl_log(src.text)
    if not s.log_lines and not s.nccl_version:
        src.fail(None, "no NCCL INFO line in it")
    first = next((i for i, ln in enumerate(src.text.splitlines(), 1) if "NCCL" in ln), None)
    hosts = list(dict.fromkeys(m.group(1) for m in _HOST.finditer(src.text)))
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
