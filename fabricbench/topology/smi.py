"""Parse `nvidia-smi topo -m` text into a Topology (fallback when NVML fails; `--from-file` for saved runs).

    nvidia-smi topo -m > box.txt; fabricbench topo --topo-file box.txt --json

Real outputs carry ANSI escape codes (the underlined header), tab-separated columns (or spaces, once
copied through a terminal), NIC rows and columns, "X" on the diagonal, the legends, and columns
CPU Affinity / NUMA Affinity / GPU NUMA ID with an empty cell before the last one. Cells are matched to
header columns by position for the link matrix; the trailing columns are matched by their names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from fabricbench.errors import UsageError
from fabricbench.files import read_input
from fabricbench.results import records as result_records
from fabricbench.topology.links import normalize_link
from fabricbench.topology.model import Gpu, Nic, Topology

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[(?:[0-9]{1,2}(?:;[0-9]{1,2})*)m")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d+_\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _cells(line: str) -> list[str]:
    """Tab-separated cells (kept, empty ones too) or, for space-only text, whitespace tokens."""
    if "\t" in line:
        return [c.strip() for c in line.split("\t")]
    return line.split()


def _is_header(line: str) -> bool:
    """The column header names GPU0 and, unlike GPU0's own row, no link follows it."""
    cells = [c for c in _cells(line) if c]
    if "GPU0" not in cells:
        return False
    after = cells[cells.index("GPU0") + 1:]
    return not after or normalize_link(after[0]) is None


def parse_topo_matrix(text: str, source: str = "nvidia-smi") -> Topology:
    """A Topology from `nvidia-smi topo -m` output; UsageError when the text is not one."""
    lines = [strip_ansi(l).rstrip("\r\n") for l in text.splitlines()]
    header_at = next((i for i, l in enumerate(lines) if _is_header(l)), None)
    if header_at is None:
        raise UsageError(f"{source}: not an `nvidia-smi topo -m` output (no header row naming GPU0)")
    header = [c for c in _cells(lines[header_at]) if c]
    if "\t" not in lines[header_at]:  # space-separated: re-join the multi-word trailing column names
        joined = " ".join(header)
        for name in _TRAILING:
            joined = joined.replace(name, name.replace(" ", "\0"))
        header = [c.replace("\0", " ") for c in joined.split()]
    columns = []
    for c in header:
        if not _DEVICE.match(c):
            break
        columns.append(c)
    trailing = header[len(columns):]
    n = len(columns)

    rows: dict[str, tuple[list[str], list[str]]] = {}
    for lineno, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        if not line.strip():
            if rows:
                break  # the blank line before "Legend:"
            continue
        cells = _cells(line)
        label = cells[0] if cells else ""
        if not _DEVICE.match(label):
            if rows:
                break
            continue
        body = cells[1:]
        links = body[:n]
        normalized = [normalize_link(c) for c in links]
        if len(links) < n or any(v is None for v in normalized):
            bad = next((c for c, v in zip(links, normalized) if v is None), "(missing cells)")
            raise UsageError(f"{source}: line {lineno} ({label}): {bad!r} is not a topo -m link "
                             f"(X, NV#, PIX, PXB, PHB, NODE, SYS)")
        rows[label] = (normalized, body[n:])

    gpu_cols = [c for c in columns if c.startswith("GPU")]
    if not gpu_cols or any(c not in rows for c in gpu_cols):
        missing = [c for c in gpu_cols if c not in rows] or ["GPU0"]
        raise UsageError(f"{source}: not an `nvidia-smi topo -m` output (no row for {', '.join(missing)})")
    gpu_pos = [columns.index(c) for c in gpu_cols]
    for c in gpu_cols:
        diag = rows[c][0][columns.index(c)]
        if diag != "X":
            raise UsageError(f"{source}: row {c} has {diag!r} on the diagonal where topo -m prints X")

    legend = {}
    for line in lines:
        m = _NIC_LEGEND.match(line)
        if m:
            legend[m.group(1)] = m.group(2)

    gpus, links = [], []
    for c in gpu_cols:
        row_links, extra = rows[c]
        facts = _trailing_facts(trailing, extra)
        gpus.append(Gpu(index=int(c[3:]), cpu_affinity=facts.get("CPU Affinity"),
                        numa_node=_int(facts.get("NUMA Affinity"))))
        links.append(tuple(row_links[p] for p in gpu_pos))
    nics = tuple(Nic(label=c, device=legend.get(c, None if c.startswith("NIC") else c),
                     links=tuple(rows[c][0][p] for p in gpu_pos))
                 for c in columns if not c.startswith("GPU") and c in rows)
    return Topology(gpus=tuple(gpus), links=tuple(links), nics=nics, source=source)


def _trailing_facts(names: list[str], cells: list[str]) -> dict[str, str]:
    """Match the trailing cells to their column names.

    Real outputs put an empty cell before "GPU NUMA ID" that the header does not have; when there are
    more cells than names, empty cells are dropped (from the right end backwards) until they match.
    """
    cells = list(cells)
    while len(cells) > len(names) and "" in cells:
        cells.pop(len(cells) - 1 - cells[::-1].index(""))
    out = {}
    for name, value in zip(names, cells):
        if value and value.upper() != "N/A":
            out[name] = value
    return out


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def read_nvidia_smi(timeout_s: float = 20.0) -> Topology | None:
    """Run `nvidia-smi topo -m` and parse it; None when the tool is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        return parse_topo_matrix(out.stdout, source="nvidia-smi")
    except UsageError:
        return None


def load_file(path: str | os.PathLike, *, what: str = "--topo-file") -> Topology:
    """A topology saved on some machine: `nvidia-smi topo -m` text, `fabricbench topo --json`, or a
    results file holding a topology (or study machine) record. Anything else, a FIFO or device, or a
    damaged table is a UsageError of one line naming `what` (the option it came from)."""
    text = read_input(path, what=what)
    start = text.lstrip("\ufeff \t\r\n")[:1]
    try:
        if start == "{":
            return _from_json_text(text, path, what)
        return parse_topo_matrix(text, source=f"file:{path}")
    except UsageError as e:  # say it in the option's words
        msg = str(e)
        for prefix in (f"file:{path}: ", "topology: "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        raise UsageError(f"{what} {path}: {msg}") from None


def _from_json_text(text: str, path, what: str) -> Topology:
    try:
        doc = result_records.loads_record(text)
    except RecursionError:
        raise UsageError("nested too deeply to be a topology") from None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "links" in doc:
        return Topology.from_dict(doc)
    # a results file (JSON lines): the last topology snapshot or study machine record in it
    got = result_records.parse_lines(text, source=str(path))
    for rec in reversed(got.records):
        body = rec.get("topology") if rec.get("kind") == "machine" else (rec if rec.get("kind") == "topology" else None)
        if isinstance(body, dict) and body.get("links"):
            return Topology.from_dict(body)
    raise UsageError("neither `nvidia-smi topo -m` output, `fabricbench topo --json`, nor a results file "
                     "with a topology record")


read_file = load_file  # the name tests and older callers use
