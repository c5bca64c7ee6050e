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

_VIA = re.compile(r"NCCL INFO Channel \d+/\d+ : \d+\[[0-9a-fx]+\] -> \d+\[[0-9a-fx]+\]"
                  r"(?: \[(?:send|receive)\])? via (\S+(?: pointer)?(?:/\S+)*)")
# Releases differ: "comm 0x.. rank 0 nranks 2 cudaDev ..."; "ncclCommInitRankFunc comm 0x.. rank 0 nranks 1
# cudaDev ... Init START" (a function name first, "[Rank r] " in some); "comm 0x.. rank 0 nRanks 1 nNodes 1 ..."
# (2.28.9 on the H200 wrote no line the first form matched: its one-rank records lost their rank count)
_NRANKS = re.compile(r"NCCL INFO (?:\[Rank \d+\] )?(?:\w+ )?comm 0x[0-9a-f]+ rank \d+ nranks (\d+)", re.IGNORECASE)
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_NVLS = re.compile(r"NCCL INFO .*(?:Connected NVLS|NVLS comm|nvlsSupport 1)")
_VERSION = re.compile(r"NCCL version (\S+)")


def transport_of(path: str) -> str:
    """'P2P/CUMEM/read' -> 'P2P/CUMEM'; 'SHM/direct/direct' -> 'SHM'; 'NET/IB/0/GDRDMA' -> 'NET/IB'."""
    parts = path.split("/")
    family = parts[0].upper()
    if family == "SHM":
        return "SHM"
    if family in ("P2P", "NET") and len(parts) > 1:
        return f"{family}/{parts[1]}"
    return family


@dataclass(kw_only=True)
class TransportSummary:
    transports: list[str] = field(default_factory=list)  # sorted, e.g. ["P2P/CUMEM"]
    connections: int = 0  # channel connection lines seen
    nranks: int | None = None  # from "comm ... nranks N" lines
    network: str | None = None  # "Socket", "IB" (NCCL's network plugin, used between nodes or by `net`)
    nvls: bool = False  # NVLink SHARP connected
    nccl_version: str | None = None
    log_lines: int = 0  # NCCL INFO lines read

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
                "network": self.network, "nvls": self.nvls, "nccl_version": self.nccl_version,
                "log_lines": self.log_lines}


def parse_nccl_log(text: str) -> TransportSummary:
    s = TransportSummary()
    found: set[str] = set()
    for line in text.splitlines():
        if "NCCL INFO" in line:
            s.log_lines += 1
        m = _VIA.search(line)
        if m:
            found.add(transport_of(m.group(1)))
            s.connections += 1
            continue
        m = _NRANKS.search(line)
        if m:
            s.nranks = max(s.nranks or 0, int(m.group(1)))
            continue
        m = _NETWORK.search(line)
        if m:
            s.network = m.group(1)
            continue
        m = _VERSION.search(line)
        if m and s.nccl_version is None:
            s.nccl_version = m.group(1)
        if _NVLS.search(line):
            s.nvls = True
    s.transports = sorted(found)
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
