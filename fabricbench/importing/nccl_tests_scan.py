"""nccl-tests' text, line by line -> runs (facts, table layout, rows, NCCL log lines), not yet records.

    fabricbench import all_reduce_perf.log --out imported.jsonl

A run starts at `# Collective test starting`, at `# nThread ...`, at a version line or a command line naming
a `*_perf` program, or at a new table header, once the current run has rows. NCCL lines may arrive anywhere,
even inside a row: the row's pieces are joined back together; NCCL lines after a run concluded go to the
next run if one starts (another process starting it under mpirun), else stay with this one.

Runs are given as they end, so a file is never held whole: a run holds its table's measurements (repeats
gathered, repeats.py) and at most LOG_CAP bytes of its NCCL log (NCCL names the transports at communicator
set-up, before the table; later lines are counted, not kept).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fabricbench.importing.base import Source, nccl_version_from_code, op_name, strip_prefix, unglue_tags
from fabricbench.importing.collective import RunFacts
from fabricbench.importing.nccl_tests_rows import NUMERIC, Layout, is_row, parse_row, side_of, split_glued, width
from fabricbench.importing.repeats import MAX_GBPS, MAX_WHOLE, Table, figures_problem

_VERSION = re.compile(r"nccl-tests version (\S+)(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?")
_STARTING = re.compile(r"Collective test starting: (\S+)")
_CONCLUDED = re.compile(r"Collective test concluded")
_NTHREAD = re.compile(r"nThread +(\d+) +nGpus +(\d+) +minBytes +(\d+) +maxBytes +(\d+)")
_ITERS = re.compile(r"warmup iters: *(\d+) +iters: *(\d+)")
_GRAPH = re.compile(r"\bgraph: *(\d+)")
_VALIDATION = re.compile(r"\bvalidation: *(\d+)")
_RANK = re.compile(r"Rank +(\d+) +(?:Group +\d+ +)?(?:Pid +\d+ +)?on +(\S+) +device +(\d+) +\[[^\]]*\] +(.*?)\s*$")
# NCCL 1's tests and the first nccl-tests: "#   Device  0 ->  0 [0x0a] GeForce GTX TITAN X" (one process)
_DEVICE = re.compile(r"^Device +(\d+) +-> +(\d+) +\[[^\]]*\] +(.*?)\s*$")
_PROGRAM = re.compile(r"(?:^|[\s/=])([a-z_]+_(?:perf|test))(?:_mpi)?\b")  # NCCL 1: all_reduce_test
# Where an NCCL line starts inside a line: "host:pid:tid [dev] NCCL INFO", or NCCL's bare version line.
_LOG_START = re.compile(r"[^\s:]*:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE)|NCCL version \d")
# the first nccl-tests' header names: "bytes N type op time algbw busbw res" (time in ms then)
_ALIASES = {"bytes": "size", "n": "count", "op": "redop", "elements": "count"}


LOG_CAP = 8 << 20  # bytes of NCCL log lines one run keeps
BLOCK = 512  # plain lines read as fast-path rows at once


class LogLines:
    """A run's NCCL lines, the first LOG_CAP bytes kept and the rest counted."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.size = 0
        self.dropped = 0  # NCCL INFO lines past the cap
        self.dropped_lines = 0

    def __bool__(self) -> bool:
        return bool(self.kept)

    def append(self, line: str) -> None:
        if self.size + len(line) > LOG_CAP:
            self.dropped_lines += 1
            self.dropped += "NCCL INFO" in line
            return
        self.kept.append(line)
        self.size += len(line) + 1

    def extend(self, other: LogLines) -> None:
        for line in other.kept:
            self.append(line)
        self.dropped += other.dropped
        self.dropped_lines += other.dropped_lines

    def text(self) -> str:
        return "\n".join(self.kept)


@dataclass(kw_only=True)
class Run:
    index: int
    line: int  # where it starts (1-based)
    facts: RunFacts = field(default_factory=RunFacts)
    layout: Layout | None = None
    rows: Table = field(default_factory=Table)
    log: LogLines = field(default_factory=lambda: LogLines())
    ranks: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # rank -> host, device, name
    started: bool = False  # saw "# Collective test starting"
    time_unit: str | None = None  # "us" or "ms", from the units line under the header
    first_era: bool = False  # a "bytes N type op" header: the first nccl-tests, which printed milliseconds
    configured: bool = False  # saw "# nThread ..."
    concluded: bool = False  # saw "# Collective test concluded"
    # the fast path (Scanner._fast_row): a row's leading cells -> its measurement, for a table whose every
    # placement is time, algbw, busbw, #wrong (the current era without -I or -U); 0: no fast path
    fast: dict[tuple, Any] = field(default_factory=dict)
    fast_width: int = 0
    fast_pre: int = 0
    fast_zeros: list[str] = field(default_factory=list)  # "0" per placement: the #wrong the fast path reads


def _fast_shape(layout: Layout | None) -> tuple[int, int]:
    """(a row's cells, its leading cells) where the fast path can read the table's rows, else (0, 0)."""
    if layout is None or layout.preamble[:2] != ["size", "count"] or \
            any(s[1:] != ["algbw", "busbw", "#wrong"] or s[0] not in ("time", "cputime") for s in layout.sides):
        return 0, 0
    return len(layout.preamble) + 4 * len(layout.sides), len(layout.preamble)


def _row_start(tokens: list[str]) -> bool:
    """A table row's beginning: size, count, then a type name (a row's later pieces are figures only)."""
    return len(tokens) >= 3 and tokens[0].isdigit() and tokens[1].isdigit() and not NUMERIC.match(tokens[2])


class Scanner:
    """Reads one file's lines in order; `runs()` gives every run, rows or not, as each ends."""

    def __init__(self, src: Source):
        self.src = src
        self.done: list[Run] = []
        self.run = Run(index=0, line=1)
        self.pending: list[str] = []  # a row's first pieces, cut by an NCCL line
        self.pending_line = 0
        # NCCL lines after a run concluded: another process's start of the next run (mpirun interleaves
        # them), or this run's teardown; they go to the next run if one starts, else stay with this one
        self.after = LogLines()

    def runs(self) -> Iterator[Run]:
        block: list[tuple[int, str]] = []  # lines that may be fast-path rows, read BLOCK at a time
        for item in self.src.lines():
            raw = item[1]
            if self.run.fast and not self.pending and "[" not in raw and ":" not in raw and "#" not in raw:
                block.append(item)
                if len(block) >= BLOCK:
                    yield from self._block(block)
                    block = []
                continue
            if block:  # the lines before this one first: a header or an NCCL line may change the run
                yield from self._block(block)
                block = []
            yield from self._one(*item)
        yield from self._block(block)
        if self.pending:
            self.src.warn(self.pending_line, f"skipped an incomplete table row at the end ({' '.join(self.pending)})")
        self.run.log.extend(self.after)
        yield self.run

    def _new_run(self, line_no: int) -> None:
        self.done.append(self.run)
        self.run = Run(index=self.run.index + 1, line=line_no, log=self.after)
        self.after = LogLines()

    def _one(self, line_no: int, raw: str) -> Iterator[Run]:
        if self.run.fast and self._fast_row(raw):
            return
        self._line(line_no, unglue_tags(strip_prefix(raw)))
        if self.done:
            yield self.done.pop()

    def _block(self, block: list[tuple[int, str]]) -> Iterator[Run]:
        """Lines in order: all at once where every one is a fast-path row, else each by _one."""
        if not block or self._fast_rows([raw for _, raw in block]):
            return
        for line_no, raw in block:
            yield from self._one(line_no, raw)

    def _fast_rows(self, lines: list[str]) -> bool:
        """_fast_row for a block of lines at once, column by column in C (a call per row was most of a large
        file's time), with the same checks; False, with nothing added, where any line fails one of them (the
        block then goes a line at a time, where a row that fails goes the general way)."""
        run = self.run
        n, width, pre = len(lines), run.fast_width, run.fast_pre
        tokens = " ".join(lines).split()
        if not width or len(tokens) != n * width:
            return False
        groups = list(map(run.fast.get, zip(*(tokens[i::width] for i in range(pre)))))
        if None in groups:
            return False
        cols: list[list[float]] = []
        for c in range(width - pre):
            col = tokens[pre + c::width]
            if c % 4 == 3:  # #wrong: 0 on the fast path
                if col.count("0") != n:
                    return False
                cols.append([0.0] * n)
                continue
            try:
                f = list(map(float, col))
            except ValueError:  # N/A, a word
                return False
            # a finite figure >= 0, a time > 0, a bandwidth at most MAX_GBPS (a row's cells shifted by a
            # missing one elsewhere in the block fail here or in the keys above)
            if not math.isfinite(sum(f)) or min(f) < 0 or (c % 4 == 0 and min(f) <= 0) or \
                    (c % 4 != 0 and max(f) > MAX_GBPS):
                return False
            cols.append(f)
        run.rows.add_fast_rows(groups, zip(*cols))
        return True

    def _fast_row(self, raw: str) -> bool:
        """A plain row (no tag, no NCCL line in it) of a measurement already seen, added without the general
        parse: the repeats of -N run cycles are most of a large file. False: the general path reads it (and
        refuses what is impossible there)."""
        run = self.run
        if self.pending or "[" in raw or ":" in raw:
            return False
        t = raw.split()
        if len(t) != run.fast_width:
            return False
        pre = run.fast_pre
        g = run.fast.get(tuple(t[:pre]))
        if g is None:
            return False
        cells = t[pre:]
        if cells[3::4] != run.fast_zeros:  # a #wrong other than 0 goes the general way
            return False
        try:
            f = list(map(float, cells))
        except ValueError:  # N/A, a word
            return False
        # per placement: time, algbw, busbw, #wrong; every figure >= 0, a time > 0, and a bandwidth at most
        # MAX_GBPS (looked at closely only where some figure is that large: a long time)
        if min(f) < 0 or min(f[0::4]) <= 0 or (max(f) > MAX_GBPS and max(f[1::4] + f[2::4]) > MAX_GBPS):
            return False
        run.rows.add_fast(g, f)
        return True

    def _add_row(self, line_no: int, parsed: tuple[dict[str, str], list[dict[str, str]]]) -> None:
        """A row into its run's table; a row whose figures are impossible is left out (and counted)."""
        pre, cells = parsed
        if int(pre["size"]) >= MAX_WHOLE or int(pre["count"]) >= MAX_WHOLE:
            self.src.refuse(line_no, f"size {pre['size']} or count {pre['count']} past 64 bits")
            return
        sides = []
        for c in cells:
            side = side_of(c)
            why = figures_problem(side)
            if why:
                self.src.refuse(line_no, why)
            sides.append(None if why else side)
        g = self.run.rows.add(line_no, pre, sides)
        if g is not None and self.run.fast_width and len(pre) == self.run.fast_pre and all(g.sides):
            self.run.fast[tuple(pre.values())] = g
        if g is None and self.run.rows.skipped == 1:
            self.src.warn(line_no, f"a table of more than {len(self.run.rows.groups)} sizes; the rows of further "
                                   f"sizes are skipped")

    def _line(self, line_no: int, line: str) -> None:
        if self._log_line(line_no, line):
            return
        body = line.strip()
        if not body or self._continue_row(line_no, body):
            return
        text = body.lstrip("#").strip()
        if not text:
            return
        for kind in (self._marker, self._config, self._rank, self._table):
            if kind(line_no, text):
                return
        self._command_line(line_no, body)

    def _log_line(self, line_no: int, line: str) -> bool:
        """An NCCL line (or the tail of a row cut by one); the row's pieces wait in `pending`."""
        m = _LOG_START.search(line)
        if not m:
            return False
        (self.after if self.run.concluded else self.run.log).append(line[m.start():])
        before = line[:m.start()]
        if before.strip() and NUMERIC.match(before.split()[0]) and not before.lstrip().startswith("#"):
            # a row cut by NCCL's line: "...  -1host:12:34 [0] NCCL INFO ..." (the host may be glued on)
            if self.pending and _row_start(before.split()):
                self._drop_pending()  # a new row began before the last one was complete
            if not self.pending:
                self.pending_line = line_no
            self.pending.extend(split_glued(before.split()))
        return True

    def _drop_pending(self) -> None:
        self.src.warn(self.pending_line, f"skipped an incomplete table row ({' '.join(self.pending)})")
        self.pending = []

    def _continue_row(self, line_no: int, body: str) -> bool:
        """True when the line completed (or continued) a row cut by an NCCL line."""
        if not self.pending:
            return False
        joined = self.pending + body.split()
        parsed = parse_row(joined, self.run.layout)
        if parsed is not None:
            self._add_row(self.pending_line, parsed)
            self.pending = []
            return True
        if is_row(body.split(), self.run.layout) or not NUMERIC.match(body) or _row_start(body.split()):
            self._drop_pending()
            return False
        self.pending = joined  # a further piece of the same row (cut twice)
        return True

    def _marker(self, line_no: int, text: str) -> bool:
        """`Collective test starting/concluded` and nccl-tests' version line."""
        run = self.run
        if _CONCLUDED.search(text):
            run.concluded = True
            return True
        m = _STARTING.search(text)
        if m:
            if run.rows or run.started or run.configured:
                self._new_run(line_no)
            self.run.started = True
            self.run.facts.op = op_name(m.group(1)) or self.run.facts.op
            return True
        m = _VERSION.search(text)
        if m:
            if run.rows:
                self._new_run(line_no)
            self.run.facts.tool_version = m.group(1)
            if m.group(3):
                self.run.facts.nccl_version = nccl_version_from_code(int(m.group(3)))
            return True
        return False

    def _config(self, line_no: int, text: str) -> bool:
        """`# nThread 1 nGpus 1 minBytes ...` with the warmup/iters/graph/validation lines it carries."""
        m = _NTHREAD.search(text)
        if not m:
            return False
        if self.run.rows or self.run.configured:
            self._new_run(line_no)
        run = self.run
        run.configured = True
        it = _ITERS.search(text)
        if it:
            run.facts.warmup, run.facts.iters = int(it.group(1)), int(it.group(2))
        g = _GRAPH.search(text)
        if g:
            run.facts.graph = int(g.group(1)) > 0
        v = _VALIDATION.search(text)
        if v:
            run.facts.validation = int(v.group(1)) > 0
        return True

    def _rank(self, line_no: int, text: str) -> bool:
        """`#  Rank  0 ... on host device 0 [...] NAME` (and the first era's `Device 0 -> 0` lines)."""
        m = _RANK.search(text)
        if m and text.startswith("Rank"):
            self.run.ranks[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(4))
            return True
        m = _DEVICE.match(text)
        if m:
            self.run.ranks[int(m.group(1))] = ("", int(m.group(2)), m.group(3))
            return True
        return False

    def _table(self, line_no: int, text: str) -> bool:
        """The table: its units line, its header (a new layout may start a run) and its rows."""
        run = self.run
        tokens = text.split()
        if tokens[0] == "(B)" or (tokens[0].startswith("(") and "(GB/s)" in tokens):
            run.time_unit = "ms" if "(ms)" in tokens else "us" if "(us)" in tokens else run.time_unit
            return True
        names = [_ALIASES.get(t.lower(), t) for t in tokens]
        if names[0] == "size" and "count" in names:
            run.first_era = tokens[0].lower() == "bytes"
            layout = Layout.of_header(names)
            if layout is None:
                self.src.warn(line_no, "a table header without a time column; its rows are read by their shape")
            if run.rows and run.layout is not None and layout is not None and layout != run.layout:
                self._new_run(line_no)  # another table in the same run's place: a new block
            self.run.layout = layout or run.layout
            self.run.fast_width, self.run.fast_pre = _fast_shape(self.run.layout)
            self.run.fast_zeros = ["0"] * len(self.run.layout.sides) if self.run.layout else []
            return True
        parsed = parse_row(tokens, run.layout)
        if parsed is not None:
            self._add_row(line_no, parsed)
            return True
        if (len(tokens) >= 4 and tokens[0].isdigit() and tokens[1].isdigit() and not NUMERIC.match(tokens[2])
                and (run.layout is not None or run.rows)):
            self.src.warn(line_no, f"skipped a table row that does not fit the table's {width(run.layout)} columns "
                                   f"({len(tokens)} values)")
            return True
        return False

    def _command_line(self, line_no: int, body: str) -> None:
        """A command line (after a shell prompt, or mpirun's) names the next run's program."""
        m = _PROGRAM.search(body)
        if m and op_name(m.group(1)) and not body.startswith("#"):
            if self.run.rows:
                self._new_run(line_no)
            if not self.run.started:
                self.run.facts.op = op_name(m.group(1))
