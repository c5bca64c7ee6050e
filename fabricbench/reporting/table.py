"""Every terminal table fabricbench prints, through one function that never cuts a cell.

    fabricbench sweep --engine torch --backend gloo --nprocs 2 --sizes 1K-1M     (the sweep table)
    COLUMNS=80 fabricbench relate sweeps.jsonl train.jsonl                         (reflowed to 80 columns)

`render(console, title, cols, rows)` prints a table whose figures and names are never cut with "…":
numbers never wrap (a column is at least as wide as its widest figure), prose wraps at spaces. When the
terminal is narrower than the table, it reflows in this order, each step only if the last did not fit:
short headers with a legend under the table; then a column with one value in every row goes into the
title ("type float32, place out"); then the columns split into parts, each part repeating the
key columns (op, size, ...) so that every row can still be read across; then, at widths where even that
cannot fit, one block of "header: value" lines per row. Piped output (a file, a CI log) is reflowed to
`COLUMNS` when that is set (`COLUMNS=80 fabricbench sweep ... | tee log`); without it, it gets the full table
at its natural width, so that `grep` and diff see one row per line. Piped lines carry no trailing blanks.

The sweep table (`SweepTable`) grows as results arrive and is printed through the same function.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, TextIO

from fabricbench.progress import Progress, piped_width
from fabricbench.reporting.analysis import fmt, fmt_cv
from fabricbench.results.status import KIND_STATUSES, TIMED_COLLECTIVE
from fabricbench.sizes import format_size

PIPED_WIDTH = 10_000  # no table is this wide: piped output keeps every row on one line


@dataclass(frozen=True)
class Col:
    """One column: its header, a short header for narrow terminals (explained in the legend), and whether
    it is a key (repeated in every part of a split table) or prose (wraps at spaces; everything else never
    wraps)."""

    name: str
    short: str = ""
    legend: str = ""  # what the short header means, e.g. "algbw = algorithm bandwidth, GB/s"; "-": said elsewhere
    justify: str = "right"
    key: bool = False
    prose: bool = False


class Unpadded:
    """stdout or stderr as a pipe gets it from rich: without the blanks rich pads a line with (a row to the
    console's width, a word-wrapped line at its break), which a log would keep (209-column rows of which
    the last 100 are spaces). The stream is looked up at each write, as rich does, so a redirect holds."""

    _TRAILING = re.compile(r"[ \t]+(?=\n)")

    def __init__(self, *, stderr: bool = False) -> None:
        self.stderr = stderr

    @property
    def stream(self) -> TextIO:
        import sys

        return sys.stderr if self.stderr else sys.stdout

    def write(self, text: str) -> int:
        self.stream.write(self._TRAILING.sub("", text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False


def console(*, stderr: bool = False, width: int | None = None):
    """A rich console: the terminal's width on a TTY; otherwise COLUMNS where set, else as wide as any
    table needs, so that piped output keeps full tables (rich would otherwise fold them at 80 columns);
    piped lines carry no trailing blanks (Unpadded)."""
    from rich.console import Console

    c = Console(stderr=stderr, width=width)
    if width is None and not c.is_terminal:
        asked = piped_width()
        c = Console(file=Unpadded(stderr=stderr), width=asked or PIPED_WIDTH, soft_wrap=asked is None)
    return c


def output_width() -> int | None:
    """How wide stdout's lines may be: the terminal's width, or COLUMNS under a pipe; None: as wide as
    they come (a pipe that asked for no width keeps one record per line for grep and diff)."""
    import shutil
    import sys

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return piped_width()


def fit_lines(lines: Iterable[str], width: int | None = None) -> list[str]:
    """Plain listing lines (`qualify --list-codes`, `sweep --list-ops`) within `width` (default:
    output_width()): a longer line wraps at spaces, its continuation under its last column (the text after
    the last run of 2+ spaces), else indented; a word is never cut, so a path longer than the width stays
    whole on a line of its own."""
    import textwrap

    width = output_width() if width is None else width
    out: list[str] = []
    for line in lines:
        for one in str(line).split("\n"):
            if width is None or len(one) <= width:
                out.append(one)
                continue
            cols = [m.end() for m in re.finditer(r"\S {2,}(?=\S)", one)]
            lead = len(one) - len(one.lstrip())
            hang = cols[-1] if cols and cols[-1] <= width // 2 else lead + 4
            out += textwrap.wrap(one, width, subsequent_indent=" " * hang, break_long_words=False,
                                 break_on_hyphens=False) or [one]
    return out


def _cell(v: Any):
    from rich.text import Text

    if isinstance(v, Text):
        return v
    return Text("-" if v is None else str(v))  # plain text: names hold brackets ("[shaped:1gbit]")


def _table(title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[Any]], *, short: bool):
    from rich import box
    from rich.cells import cell_len
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, collapse_padding=True)
    for i, c in enumerate(cols):
        header = (c.short or c.name) if short else c.name
        if c.prose:
            t.add_column(header, justify=c.justify, overflow="fold")
        else:  # a figure or a name: never wrapped, never cut (rich measures text by its longest word, so
            # the column's minimum is set to its widest cell: the measure then says what the table needs)
            widest = max([cell_len(header)] + [cell_len(_cell(r[i]).plain) for r in rows])
            t.add_column(header, justify=c.justify, no_wrap=True, min_width=widest)
    for r in rows:
        t.add_row(*[_cell(v) for v in r])
    return t


def _min_width(con, renderable) -> int:
    from rich.measure import Measurement

    return Measurement.get(con, con.options.update_width(PIPED_WIDTH), renderable).minimum


def _legend(cols: Sequence[Col]) -> str:
    """What each short header means; a short header that is its name without the unit ("busbw" for
    "busbw (GB/s)") needs no line of its own when another says the unit."""
    return "; ".join(c.legend or f"{c.short} = {c.name}" for c in cols
                     if c.short and c.short != c.name and c.legend != "-" and (c.legend or c.short not in c.name))


def build(con, title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[Any]],
          *, width: int | None = None) -> list:
    """The renderables that print the table within `width` (default: the console's) without cutting."""
    from rich.text import Text

    assert all(len(r) == len(cols) for r in rows), "a row has more or fewer cells than the table has columns"
    width = width or con.width
    full = _table(title, cols, rows, short=False)
    if _min_width(con, full) <= width:
        return [full]
    legend = _legend(cols)
    parts: list = []
    narrow = _table(title, cols, rows, short=True)
    if _min_width(con, narrow) <= width:
        return [narrow, Text(legend, style="dim")] if legend else [narrow]
    # a column with one value in every row says it once, in the title ("type float32, place out")
    same = [i for i, c in enumerate(cols)
            if not c.key and len(rows) > 1 and len({_cell(r[i]).plain for r in rows}) == 1]
    if same:
        said = ", ".join(f"{cols[i].short or cols[i].name} {_cell(rows[0][i]).plain}" for i in same)
        keep = [i for i in range(len(cols)) if i not in same]
        folded = build(con, f"{title}; {said}" if title else said, [cols[i] for i in keep],
                       [[r[i] for i in keep] for r in rows], width=width)
        if len([p for p in folded if hasattr(p, "columns")]) == 1:  # it fits whole now: done
            return folded
    keys = [i for i, c in enumerate(cols) if c.key] or [0]
    rest = [i for i in range(len(cols)) if i not in keys]
    groups: list[list[int]] = []
    for i in rest:  # greedy: each part as many columns as fit beside the keys
        trial = (groups[-1] + [i]) if groups else [i]
        sub = _table(None, [cols[k] for k in keys + trial], [[r[k] for k in keys + trial] for r in rows],
                     short=True)
        if groups and _min_width(con, sub) <= width:
            groups[-1] = trial
        else:
            groups.append([i])
    fits = all(_min_width(con, _table(None, [cols[k] for k in keys + g], [[r[k] for k in keys + g] for r in rows],
                                      short=True)) <= width for g in groups)
    if fits:
        for n, g in enumerate(groups, 1):
            t = _table(f"{title} ({n}/{len(groups)})" if title else None, [cols[k] for k in keys + g],
                       [[r[k] for k in keys + g] for r in rows], short=True)
            parts.append(t)
        if legend:
            parts.append(Text(legend, style="dim"))
        return parts
    # Too narrow even for one column beside the keys: one block per row.
    if title:
        parts.append(Text(title, style="italic"))
    for r in rows:
        for c, v in zip(cols, r):
            parts.append(Text(f"{c.name}: ") + _cell(v))
        parts.append(Text(""))
    return parts


def render(con, title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[Any]]) -> None:
    """Print the table on `con` (see build)."""
    for p in build(con, title, cols, rows):
        con.print(p)


# --- the sweep table --------------------------------------------------------------------------------------

SWEEP_COLS = (
    Col("op", justify="left", key=True),
    Col("size", key=True),
    Col("count"),
    Col("type", justify="left"),
    Col("place", justify="left"),
    Col("time (us)", "us", "us = median time, microseconds"),
    Col("algbw (GB/s)", "algbw", "algbw, busbw in GB/s"),
    Col("busbw (GB/s)", "busbw"),
    Col("#wrong", "wrong", "wrong = #wrong elements"),
    Col("cv"),
)
COLUMNS = tuple(c.name for c in SWEEP_COLS)
CSV_FIELDS = ("op", "dtype", "bytes", "count", "nranks", "inplace", "graph", "time_us", "mean_us", "min_us",
              "max_us", "p95_us", "cv", "algbw_gbps", "busbw_gbps", "wrong", "status", "engine", "fabric",
              "timestamp")


_num = fmt  # the one number formatter (fabricbench/reporting/analysis.py)
# Collectives with no time (waived, timed out, failed): a row of dashes, the reason under the table.
UNTIMED = KIND_STATUSES["collective"] - TIMED_COLLECTIVE


def note(rec: dict[str, Any]) -> str | None:
    """The line under the table for a waived or failed record: what and why, never cut."""
    if rec.get("status") in UNTIMED:
        return f"{rec['op']} {format_size(rec['requested_bytes'])}: {rec['status']}: {rec.get('message') or ''}"
    return None


def row(rec: dict[str, Any]) -> list[str]:
    """The sweep table's cells for one record (a waived or failed one's reason goes under the table:
    see note())."""
    status = rec.get("status")
    if status in UNTIMED:
        return [rec["op"], format_size(rec["requested_bytes"]), "-", rec["dtype"],
                "in" if rec["inplace"] else "out", status, "", "", "", ""]
    wrong = rec.get("wrong")
    busbw = _num(rec.get("busbw_gbps")) if rec.get("busbw_gbps") is not None else "n/a"
    return [rec["op"], format_size(rec["bytes"]), f"{rec['count']:,}", rec["dtype"],
            ("in" if rec["inplace"] else "out") + (" graph" if rec.get("graph") else ""),
            _num(rec.get("time_us")), _num(rec.get("algbw_gbps")), busbw,
            "N/A" if wrong is None else str(wrong), fmt_cv(rec.get("cv"))]


class SweepTable:
    """A table that grows as results arrive (live on a terminal, with a progress bar), printed at the end
    through render()'s reflow so that nothing is cut."""

    def __init__(self, total: int, title: str, *, progress: bool) -> None:
        self.console = console()
        self.title = title
        self.total = total
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self._live = None
        self._progress = None
        if progress and self.console.is_terminal and total > 1:
            from rich.live import Live
            from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._progress = Bar("[progress.description]{task.description}", BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn())
            self._task = self._progress.add_task("measuring", total=total)
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        # not on a terminal (a CI log): the table comes whole at the end, so a line now and then on stderr
        # says how far the sweep got (fabricbench/progress.py's log mode)
        self._log = Progress("sweep", total=total, quiet=not progress or self._live is not None).__enter__()

    def _render(self):
        from rich.console import Group

        parts = build(self.console, self.title, SWEEP_COLS, self.rows)
        if self._progress is None:
            return Group(*parts)
        return Group(*parts, self._progress)

    def add(self, rec: dict[str, Any]) -> None:
        self.rows.append(row(rec))
        for n in (note(rec), rec.get("busbw_note")):
            if n and n not in self.notes:
                self.notes.append(n)
        if self._live is not None:
            self._progress.advance(self._task)
            self._live.update(self._render())
        self._log.advance(item=f"{rec.get('op')} {format_size(rec.get('bytes') or rec.get('requested_bytes') or 0)}")

    def close(self) -> None:
        from rich.text import Text

        self._log.__exit__(None, None, None)
        if self._live is not None:
            self._live.stop()  # transient: the live view goes, the final table is printed once below
        if self.rows:  # a run that failed before its first result prints its error alone
            render(self.console, self.title, SWEEP_COLS, self.rows)
        if any(r[-1].endswith("!") for r in self.rows):
            self.console.print("[dim]cv ! : the spread is over half the median; the figure is noise, rerun "
                               "with more --iters or --adaptive[/dim]")
        for n in self.notes:
            self.console.print(Text(f"note: {n}", style="dim"))


class CsvSink:
    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        self.w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        self.w.writeheader()

    def add(self, rec: dict[str, Any]) -> None:
        self.w.writerow(rec)
        self.fh.flush()

