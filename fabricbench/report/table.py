"""The sweep table: nccl-tests' familiar columns, one row per measurement, printed as measured.

       size    count   type   place  redop   time(us)  algbw(GB/s)  busbw(GB/s)  #wrong
"""

from __future__ import annotations

import csv
from typing import Any, TextIO

from fabricbench.report.analysis import fmt
from fabricbench.sizes import format_size

COLUMNS = ("op", "size", "count", "type", "place", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
           "cv")
CSV_FIELDS = ("op", "dtype", "bytes", "count", "nranks", "inplace", "graph", "time_us", "mean_us", "min_us",
              "max_us", "p95_us", "cv", "algbw_gbps", "busbw_gbps", "wrong", "status", "engine", "fabric",
              "timestamp")


_num = fmt  # the one number formatter (fabricbench/report/analysis.py)


def row(rec: dict[str, Any]) -> list[str]:
    status = rec.get("status")
    if status in ("waived", "timeout", "error"):
        return [rec["op"], format_size(rec["requested_bytes"]), "-", rec["dtype"],
                "in" if rec["inplace"] else "out", status, "", "", "", (rec.get("message") or "")[:60]]
    wrong = rec.get("wrong")
    busbw = _num(rec.get("busbw_gbps")) if rec.get("busbw_gbps") is not None else "n/a"
    return [rec["op"], format_size(rec["bytes"]), str(rec["count"]), rec["dtype"],
            ("in" if rec["inplace"] else "out") + (" graph" if rec.get("graph") else ""),
            _num(rec.get("time_us")), _num(rec.get("algbw_gbps")), busbw,
            "N/A" if wrong is None else str(wrong), _num(rec.get("cv"), 3)]


class SweepTable:
    """A rich table that grows as results arrive, with a progress bar for long runs."""

    def __init__(self, total: int, title: str, *, progress: bool) -> None:
        from rich.console import Console

        self.console = Console()
        if not self.console.is_terminal:  # pipes and CI logs: wide enough that no column is cut
            self.console = Console(width=140)
        self.title = title
        self.total = total
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self._live = None
        self._progress = None
        if progress and self.console.is_terminal and total > 1:
            from rich.console import Group
            from rich.live import Live
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._progress = Progress("[progress.description]{task.description}", BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn())
            self._task = self._progress.add_task("measuring", total=total)
            self._group = Group
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.start()

    def _table(self):
        from rich.table import Table

        t = Table(title=self.title, title_justify="left", header_style="bold")
        for c in COLUMNS:
            t.add_column(c, justify="left" if c in ("op", "type", "place") else "right")
        for r in self.rows:
            t.add_row(*r)
        return t

    def _render(self):
        if self._progress is None:
            return self._table()
        return self._group(self._table(), self._progress)

    def add(self, rec: dict[str, Any]) -> None:
        self.rows.append(row(rec))
        note = rec.get("busbw_note")
        if note and note not in self.notes:
            self.notes.append(note)
        if self._live is not None:
            self._progress.advance(self._task)
            self._live.update(self._render())

    def close(self) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.stop()
        elif self.rows:  # a run that failed before its first result prints its error alone
            self.console.print(self._table())
        for n in self.notes:
            self.console.print(f"[dim]note: {n}[/dim]")


class CsvSink:
    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        self.w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        self.w.writeheader()

    def add(self, rec: dict[str, Any]) -> None:
        self.w.writerow(rec)
        self.fh.flush()
