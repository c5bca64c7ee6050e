"""Which transport NCCL actually used, read from its NCCL_DEBUG=INFO log.

    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET fabricbench sweep ...   (compare does this for you)

NCCL logs one line per channel connection, e.g.
    host:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    host:4242:4250 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct
    host:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
The transport is the family plus its mechanism: "P2P/CUMEM", "P2P/IPC", "P2P/direct pointer", "SHM",
"NET/Socket", "NET/IB". A single-rank communicator connects no channels: "none (single rank)".
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from fabricbench.fabrics.model import Fabric

# One channel connection. Releases differ: "Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM/read" (P2P, NET),
# "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct" (SHM has no "/N" sub-index), "Ring 00 : 3 -> 4 [send]
# via NET/Socket/0" (2.4-era: "Ring", no brackets), bus ids in the brackets ("0[4b000]"), plugins named with
# spaces ("via NET/NCCL RDMA Plugin v8/1/GDRDMA"), and a trailing "comm 0x..." in some builds.
_VIA = re.compile(r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)? ?: +\d+(?:\[[^\]]*\])? -> \d+(?:\[[^\]]*\])?"
                  r"(?: \[(?:send|receive)\])? via (.+?)(?: comm 0x[0-9a-fA-F]+.*)?\s*$")
# Releases differ: "comm 0x.. rank 0 nranks 2 cudaDev ..."; "ncclCommInitRankFunc comm 0x.. rank 0 nranks 1
# cudaDev ... Init START" (a function name first, "[Rank r] " in some); "comm 0x.. rank 0 nRanks 1 nNodes 1 ..."
# (2.28.9 on the H200 wrote no line the first form matched: its one-rank records lost their rank count)
_NRANKS = re.compile(r"NCCL INFO (?:\[Rank \d+\] )?(?:\w+ )?comm 0x[0-9a-f]+ rank \d+ nranks (\d+)", re.IGNORECASE)
_NODES = re.compile(r"NCCL INFO .*\bnNodes (\d+) localRanks (\d+)")
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
# Connected: "Connected NVLS" (and "... NVLS tree"), "NVLS comm 0x..", "16 nvls channels". Available only:
# "NVLS multicast support is available on dev 0" (NCCL prints it when NVLS is enabled and the GPUs support it).
_NVLS = re.compile(r"NCCL INFO .*(?:Connected NVLS|NVLS comm|nvlsSupport 1)")
_NVLS_CHANNELS = re.compile(r"NCCL INFO .*\b(\d+) nvls channels")
_NVLS_AVAILABLE = re.compile(r"NVLS multicast support is available")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
# NCCL echoes each variable it took from the environment: "NCCL_ALGO set by environment to Ring".
_ENV_SET = re.compile(r"NCCL INFO (NCCL_ALGO|NCCL_PROTO) set by environment to (.+?)\.?\s*$")


def transport_of(path: str) -> str:
    """'P2P/CUMEM/read' -> 'P2P/CUMEM'; 'SHM/direct/direct' -> 'SHM'; 'NET/IB/0/GDRDMA' -> 'NET/IB';
    'NET/NCCL RDMA Plugin v8/1/GDRDMA' -> 'NET/NCCL RDMA Plugin v8' (a plugin keeps its whole name);
    'direct shared memory' (2.4-era SHM) -> 'SHM'."""
    path = path.strip()
    parts = path.split("/")
    family = parts[0].strip().upper()
    if family == "SHM" or path.lower().startswith("direct shared memory"):
        return "SHM"
    if family in ("P2P", "NET") and len(parts) > 1 and parts[1].strip():
        return f"{family}/{parts[1].strip()}"
    return family


@dataclass(kw_only=True)
class TransportSummary:
    transports: list[str] = field(default_factory=list)  # sorted, e.g. ["P2P/CUMEM"]
    connections: int = 0  # channel connection lines seen
    nranks: int | None = None  # from "comm ... nranks N" lines
    nnodes: int | None = None  # from "comm ... nRanks N nNodes M localRanks L" (newer releases)
    local_ranks: int | None = None
    network: str | None = None  # "Socket", "IB" (NCCL's network plugin, used between nodes or by `net`)
    gdrdma: bool | None = None  # a NET connection used GPUDirect RDMA ("/GDRDMA"); None without NET lines
    nvls: bool = False  # NVLink SHARP connected (or available and nothing says it was not set up)
    nvls_available: bool = False  # "NVLS multicast support is available"
    nccl_version: str | None = None  # "2.21.5" (the "+cudaX" suffix dropped)
    log_lines: int = 0  # NCCL INFO lines read
    algo: str | None = None  # NCCL_ALGO as NCCL took it from the environment (None: NCCL's own choice)
    proto: str | None = None  # NCCL_PROTO likewise

    @property
    def families(self) -> set[str]:
        return {t.split("/")[0] for t in self.transports}

    def label(self, nranks: int | None = None) -> str:
        """What goes into a record's `transport` field."""
        if self.transports:
            return "+".join(self.transports)
        n = self.nranks if self.nranks is not None else nranks
        if n == 1:
            return "none (single rank)"
        if self.log_lines == 0:
            return "unknown (no NCCL log)"
        return "unknown (no channel connections logged)"

    def to_dict(self) -> dict:
        return {"transports": self.transports, "connections": self.connections, "nranks": self.nranks,
                "nnodes": self.nnodes, "local_ranks": self.local_ranks, "network": self.network,
                "gdrdma": self.gdrdma, "nvls": self.nvls, "nvls_available": self.nvls_available,
                "nccl_version": self.nccl_version, "log_lines": self.log_lines, "algo": self.algo,
                "proto": self.proto}


def parse_nccl_log(text: str) -> TransportSummary:
    """Everything fabricbench reads from NCCL's INFO lines; lines of any other output are ignored, so a log
    may come mixed into nccl-tests' or a training job's output, with or without mpirun's `[1,3]<stdout>:`."""
    s = TransportSummary()
    found: set[str] = set()
    nvls_connected, nvls_none = False, False
    for line in text.splitlines():
        if "NCCL INFO" in line:
            s.log_lines += 1
        m = _VIA.search(line)
        if m:
            path = m.group(1)
            found.add(transport_of(path))
            s.connections += 1
            if path.upper().startswith("NET/"):
                s.gdrdma = bool(s.gdrdma) or "/GDRDMA" in path.upper()
            continue
        m = _NRANKS.search(line)
        if m:
            s.nranks = max(s.nranks or 0, int(m.group(1)))
        m = _NODES.search(line)
        if m:
            s.nnodes = max(s.nnodes or 0, int(m.group(1)))
            s.local_ranks = max(s.local_ranks or 0, int(m.group(2)))
        m = _NETWORK.search(line)
        if m:
            s.network = m.group(1)
            continue
        m = _ENV_SET.search(line)
        if m:
            if m.group(1) == "NCCL_ALGO":
                s.algo = m.group(2)
            else:
                s.proto = m.group(2)
            continue
        m = _VERSION.search(line)
        if m and s.nccl_version is None:
            s.nccl_version = m.group(1)
        if _NVLS.search(line):
            nvls_connected = True
        m = _NVLS_CHANNELS.search(line)
        if m:
            if int(m.group(1)) > 0:
                nvls_connected = True
            else:
                nvls_none = True
        if _NVLS_AVAILABLE.search(line):
            s.nvls_available = True
    s.transports = sorted(found)
    s.nvls = nvls_connected or (s.nvls_available and not nvls_none)
    return s


def read_logs(log_dir: str | None, *texts: str) -> TransportSummary:
    """Parse every NCCL log file under log_dir plus any captured output (stdout/stderr of the child)."""
    parts = list(texts)
    if log_dir:
        for path in sorted(glob.glob(os.path.join(log_dir, "nccl.*.log"))):
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    parts.append(fh.read())
            except OSError:
                pass
    return parse_nccl_log("\n".join(p for p in parts if p))


def mismatch(fabric: Fabric, summary: TransportSummary) -> str | None:
    """A message when NCCL used a transport the fabric's label rules out (e.g. p2p-off but "via P2P")."""
    # `forbidden` names families ("P2P") or family/mechanism ("NET/IB"); "NVLS" is NVLink SHARP.
    bad = [t for t in summary.transports if t.split("/")[0] in fabric.forbidden or t in fabric.forbidden]
    if summary.nvls and "NVLS" in fabric.forbidden:
        bad.append("NVLS")
    if not bad:
        return None
    return (f"fabric {fabric.name} ({fabric.description}) expected {fabric.expected}, but NCCL used "
            f"{', '.join(bad)}")
