"""A sweep as SimAI's analytical-mode bus-bandwidth table (`busbw.yaml`).

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml [--group TP] [--fabric nvswitch]
    ./bin/SimAI_analytical -w workload.txt -g 8 -g_p_s 8 -busbw busbw.yaml     (a SimAI that reads -busbw)

What SimAI reads (aliyun/SimAI astra-sim-alibabacloud/astra-sim/system/AstraParamParse.hh, parseYaml, from
v1.0 b1c1eb66 2024-11-19 to 3454d0d2^ 2025-06-10): the FIRST LINE IS SKIPPED unread (a name); each other line
is trimmed; a line ending in ':' opens a section (TP, DP, EP, PP); else the key is the text before ':', cut at
its first comma, and the value one token, a float or `null` (null: keep SimAI's default). Keys per section:
allreduce, allgather, reducescatter, alltoall (TP, DP, EP) and busbw (PP). One figure per (section, op), in
GB/s, whatever the message size: SimAI's analytical mode prices every size at that busbw.

The three formats, none valid YAML (a bare first line, then a mapping):
1. 2024-10-18 (README's first example, b1151087): `allreduce,16384: 200` (a size after the comma, ignored by
   the parser, which cuts the key at the comma); sections TP, DP, EP;
2. 2024-11-19 v1.0 (b1c1eb66): `allreduce,: 300` (empty size); TP, DP, EP;
3. 2024-12-04 (03613a7a, "Add PP comm support"): format 2 plus `PP:` with one `busbw:` line.
Since 2025-06-10 (3454d0d2, "Auto busbw cal") the open-source binary computes busbw itself from -nv/-nic
and no longer parses -busbw (docs/Tutorial.md says so). This writes format 3, the last one read, keeping the
comma (`allreduce,: 312.4`) so that format-2 readers read it too.

Which figure: the busbw of each op's largest swept size (the bandwidth regime SimAI's single figure stands
for), or the size given; the sweep's section is --group (TP: one node's GPUs, the default). Ops the sweep
did not measure are written `null`, and the other sections all `null`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.exporting.measured import one_fabric
from fabricbench.sizes import format_size

SECTIONS = ("TP", "DP", "EP", "PP")


@dataclass(frozen=True, kw_only=True)
class SimaiOptions:
    """What `export --format simai-busbw` takes: the section the sweep fills, the fabric (when the results
    hold several) and the size whose busbw is taken (None: the largest swept)."""

    group: str = "TP"
    fabric: str | None = None
    size: int | None = None
OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
       "alltoall": "all_to_all"}
PP_OP = "sendrecv"


def table(records: list[dict[str, Any]], *, group: str = "TP", fabric: str | None = None,
          size: int | None = None) -> tuple[dict[str, dict[str, float | None]], list[str]]:
    """{section: {key: busbw or None}} and one note per figure (which record it came from)."""
    if group not in SECTIONS:
        raise UsageError(f"--group {group}: SimAI's sections are {', '.join(SECTIONS)}")
    fabric, mine = one_fabric(records, fabric, reader="SimAI")
    ranks = sorted({r.get("nranks") for r in mine})
    out: dict[str, dict[str, float | None]] = {s: ({"busbw": None} if s == "PP" else dict.fromkeys(OPS)) for s in SECTIONS}
    notes = []
    keys = {"busbw": PP_OP} if group == "PP" else OPS
    for key, op in keys.items():
        rs = [r for r in mine if r.get("op") == op and (size is None or r["bytes"] == size)]
        if not rs:
            continue
        best = max(rs, key=lambda r: (r["bytes"], not r.get("inplace")))
        out[group][key] = round(float(best["busbw_gbps"]), 3)
        notes.append(f"{group} {key}: {out[group][key]} GB/s, {op} at {format_size(best['bytes'])} on "
                     f"{best.get('nranks')} ranks (fabric {fabric})")
    if not any(v is not None for v in out[group].values()):
        raise UsageError(f"no {'/'.join(keys.values())} record{' at that size' if size else ''} on fabric {fabric}")
    if len(ranks) > 1:
        notes.append(f"the results hold several rank counts ({', '.join(map(str, ranks))}): the largest size of "
                     f"each op was taken, whatever its count")
    return out, notes


def render(tab: dict[str, dict[str, float | None]], *, name: str = "fabricbench") -> str:
    """Format 3 (see the module docstring): a first line SimAI skips, then the sections."""
    lines = [name.replace("\n", " ") or "fabricbench"]
    for section in SECTIONS:
        lines.append(f"{section}:")
        for key, v in tab[section].items():
            val = "null" if v is None else f"{v:g}"
            lines.append(f"{key}: {val}" if section == "PP" else f"{key},: {val}")
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[str, dict[str, float | None]]:
    """What SimAI's parseYaml reads from the text (its rules, for tests and for reading a table back)."""
    out: dict[str, dict[str, float | None]] = {}
    section = ""
    for line in text.splitlines()[1:]:
        line = line.strip(" ")
        if not line or line.startswith("#"):
            continue
        if line.endswith(":"):
            section = line[:-1]
            continue
        key, _, rest = line.partition(":")
        if not rest.split():
            continue
        key = key.rstrip(" ").split(",")[0]
        value = rest.split()[0]
        out.setdefault(section, {})[key] = None if value == "null" else float(value)
    return out
