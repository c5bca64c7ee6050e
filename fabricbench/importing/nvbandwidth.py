"""nvbandwidth's matrices -> copy records, the kind `fabricbench p2p` writes (measuring/copy.py).

    ./nvbandwidth > nvb.txt && fabricbench import nvb.txt --out imported.jsonl

Each matrix is titled `memcpy CE|SM <row kind>(row) <arrow> <column kind>(column) [Read1|Total...]
bandwidth (GB/s)`. The arrow says which way the data went: `->` row to column, `<-` column to row, `<->`
both at once. A CPU row is the host. N/A (not measured) and the 0.00 that older releases print on the
diagonal give no record; `SUM <test> <GB/s>` lines are kept in that test's records. Buffer size and
copy time are not printed, so bytes and time_us stay null.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fabricbench.importing.base import Source, number, strip_prefix

TOOL = "nvbandwidth"
_TITLE = re.compile(r"memcpy (CE|SM) (CPU|GPU)\(row\) (<->|->|<-) (CPU|GPU)\(column\)\s*(.*?)\s*bandwidth\s*"
                    r"\(GB/s\)", re.IGNORECASE)
# device_local_copy: one row, a copy inside each column's GPU
_LOCAL = re.compile(r"memcpy local GPU\(column\)\s*(.*?)\s*bandwidth\s*\(GB/s\)", re.IGNORECASE)
_RUNNING = re.compile(r"^Running (\S+?)\.?\s*$")
_SUM = re.compile(r"^SUM (\S+) (\S+)")
_VERSION = re.compile(r"nvbandwidth Version: *(\S+)")
_DEVICE = re.compile(r"^Device (\d+): (.*?)\s*(?:\([0-9a-fA-F:.]+\))?\s*$")
_HOSTNAME_DEV = re.compile(r"^Process +\d+ +\(([^)]*)\): device (\d+): (.*)$")


def sniff(text: str) -> bool:
    return bool(_TITLE.search(text) or _LOCAL.search(text) or _VERSION.search(text))


HELD_CAP = 65536  # records held for their test's SUM line (a 72-GPU matrix has 5,184)


def read(src: Source) -> Iterator[dict[str, Any]]:
    version, test, names = None, None, {}
    by_test: dict[str, list[dict[str, Any]]] = {}  # this test's records, until its SUM line is read
    it = _Lines(src)
    for line_no, raw in it:
        line = raw.strip()
        m = _VERSION.search(line)
        if m:
            version = m.group(1)
        m = _DEVICE.match(line)
        if m:
            names[int(m.group(1))] = m.group(2)
        m = _RUNNING.match(line)
        if m:
            yield from _flush(by_test)
            test = m.group(1)
        m = _SUM.match(line)
        if m and number(m.group(2)) is not None:
            # the test's matrices; where no "Running <test>." line named them, the ones since the last SUM
            summed = by_test.pop(m.group(1), None) or by_test.pop("", [])
            for rec in summed:
                rec["extra"]["sum_gbps"] = number(m.group(2))
                rec["extra"]["test"] = m.group(1)
            yield from _flush(by_test)
            yield from summed
        parsed = title(line)
        if parsed is not None:
            recs = _matrix(src, it, version=version, test=test, names=names, parsed=parsed)
            by_test.setdefault(test or "", []).extend(recs)
            if sum(map(len, by_test.values())) > HELD_CAP:  # no SUM line in sight: not held any longer
                yield from _flush(by_test)
    yield from _flush(by_test)


def _flush(by_test: dict[str, list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """The records held for a SUM line that has come (or will not): given out, in the order they were read."""
    for recs in by_test.values():
        yield from recs
    by_test.clear()


class _Lines:
    """The file's lines without launcher tags, with one line given back (a matrix ends at the line after it)."""

    def __init__(self, src: Source):
        self.lines, self.back = src.lines(), None

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, str]:
        if self.back is not None:
            got, self.back = self.back, None
            return got
        n, line = next(self.lines)
        return n, strip_prefix(line.rstrip())

    def push(self, item: tuple[int, str]) -> None:
        self.back = item


def _matrix(src: Source, it: _Lines, *, version, test, names, parsed) -> list[dict[str, Any]]:
    """The records of the matrix under a title: its column numbers, then its rows up to a blank line."""
    out: list[dict[str, Any]] = []
    cols: list[int] | None = None
    for line_no, line in it:
        if not line.strip():
            break
        cells = line.split()
        if cols is None:
            if not all(c.isdigit() for c in cells):
                src.warn(line_no, "a matrix without its column numbers; skipped")
                it.push((line_no, line))
                break
            cols = [int(c) for c in cells]
        elif cells[0].isdigit() and len(cells) == len(cols) + 1:
            out += matrix_records(src, rows=[(int(cells[0]), cells[1:])], version=version, test=test,
                                  line=line_no, names=names, parsed=parsed, cols=cols)
        elif cells[0].isdigit():
            src.warn(line_no, f"a matrix row with {len(cells) - 1} value(s) for {len(cols)} column(s); skipped")
        else:
            it.push((line_no, line))
            break
    return out


def title(line: str) -> tuple[str, str, str, str, str] | None:
    """A matrix title -> (method, row kind, arrow, column kind, matrix name); None for any other line."""
    m = _TITLE.search(line)
    if m:
        method, row_kind, arrow, col_kind, matrix = m.groups()
        return method.upper(), row_kind.upper(), arrow, col_kind.upper(), matrix
    local = _LOCAL.search(line)
    if local:
        return "CE", "LOCAL", "->", "GPU", local.group(1)
    return None


def matrix_records(src: Source, *, rows: list[tuple[int, list[str]]], version: str | None, test: str | None,
                   line: int | None, names: dict[int, str], parsed: tuple[str, str, str, str, str],
                   cols: list[int] | None = None) -> list[dict[str, Any]]:
    """The copy records of matrix rows [(row index, cells)]; columns are 0.. unless `cols` names them."""
    method, row_kind, arrow, col_kind, matrix = parsed
    out = []
    for row, cells in rows:
        for col, cell in zip(cols if cols is not None else range(len(cells)), cells):
            rec = _record(src, line, version, test, method, row_kind, arrow, col_kind, matrix, row, col, cell, names)
            if rec is not None:
                out.append(rec)
    return out


def _record(src: Source, line: int | None, version: str | None, test: str | None, method: str, row_kind: str,
            arrow: str, col_kind: str, matrix: str, row: int, col: int, cell: str,
            names: dict[int, str]) -> dict[str, Any] | None:
    gbps = number(cell)
    if gbps is None:
        return None  # N/A: not measured
    if row_kind == col_kind == "GPU" and row == col and gbps == 0:
        return None  # older releases print 0.00 on the diagonal: nothing measured there
    aggregate = bool(test) and ("all_to_one" in test or "one_to_all" in test)
    row_name = "host" if row_kind == "CPU" else f"GPU{col}" if row_kind == "LOCAL" else f"GPU{row}"
    if aggregate:  # one row: GPU `col` against all the others at once (a total, no pair's figure)
        row_name = "all GPUs"
    col_name = "host" if col_kind == "CPU" else f"GPU{col}"
    src_name, dst_name = (col_name, row_name) if arrow == "<-" else (row_name, col_name)
    if aggregate:  # the test's name says which way: all_to_one into GPU `col`, one_to_all out of it
        src_name, dst_name = ("all GPUs", col_name) if "all_to_one" in test else (col_name, "all GPUs")
    host = "host" in (src_name, dst_name)
    if arrow == "<->":
        direction = "bidir"
    elif host:
        direction = "h2d" if src_name == "host" else "d2h"
    else:
        direction = "uni"
    gpus = sorted({int(x[3:]) for x in (src_name, dst_name) if x.startswith("GPU")})
    head = src.header("copy", 0, tool=TOOL, tool_version=version, line=line)
    extra: dict[str, Any] = {"test": test, "method": method, "matrix": matrix or None}
    if arrow == "<->" and method == "CE" and not matrix:
        extra["note"] = "nvbandwidth CE bidirectional: the measured direction's GB/s, not the sum"
    kind = "host" if host else "peer_total" if aggregate else "peer"
    return {**head, "copy_kind": kind, "src": src_name, "dst": dst_name,
            "direction": direction, "bytes": None, "iters": None, "time_us": None, "min_us": None,
            "max_us": None, "gbps": gbps, "peer_access": None, "gpus": gpus,
            "gpu_names": [names[g] for g in gpus if g in names], "engine": TOOL,
            "formula": "as nvbandwidth printed it (GB/s, 1e9)", "extra": extra}
