"""Link strings: what `nvidia-smi topo -m` prints between two GPUs, and the limits a file's links must keep.

    fabricbench topo --topo-file saved-topo-m.txt      (every cell read through normalize_link)

A link is "X" (self), "NV<n>" (n bonded NVLinks), or the PCIe relation PIX < PXB < PHB < NODE < SYS
(fewest to most hops). Limits (a file beyond them is refused, naming the cell):
- NV1 to NV36 (MAX_NVLINKS): a pair has at most as many NVLinks as one GPU has in all; the most at the time
  of writing is 18 (H100, H200, B200, each pair on an NVSwitch board showing NV18), so 36 leaves room for a
  generation ahead. NV0 is not a link; topo -m prints no leading zeros.
- GPU indices 0 to 4095 and at most 4096 GPUs in one table (topology/model.MAX_GPUS): the largest NVLink
  domain sold is 576 GPUs, and a 4096 x 4096 table is already 16M cells.
"""

from __future__ import annotations

import re

# PCIe relations, nearest first (nvidia-smi's legend); "SOC" is the old name of SYS.
PCIE_RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
_NV = re.compile(r"^NV([1-9]\d*)$")
MAX_NVLINKS = 36  # bonded NVLinks one pair may have (see the module docstring)


def nvlink_count(link: str) -> int:
    """Bonded NVLinks in a link string ("NV18" -> 18, "SYS" -> 0)."""
    m = _NV.match(link)
    return int(m.group(1)) if m else 0


def normalize_link(token: str) -> str | None:
    """A topo -m cell as a link string, or None when it is not one."""
    t = token.strip().upper()
    if t == "SOC":
        return "SYS"
    if t == "X" or t in PCIE_RELATIONS:
        return t
    m = _NV.match(t)
    return t if m and int(m.group(1)) <= MAX_NVLINKS else None


def link_rank(link: str) -> tuple[int, int]:
    """Sort key, best link first: more NVLinks beat fewer, any NVLink beats PCIe, PIX beats SYS."""
    n = nvlink_count(link)
    if n:
        return (0, -n)
    if link in PCIE_RELATIONS:
        return (1, PCIE_RELATIONS.index(link))
    return (2, 0)  # unknown: worst
