"""nccl-tests' text output, every era, -> collective records (and the NCCL log mixed into it).

    fabricbench import all_reduce_perf.log --out imported.jsonl

What varies between eras and copies, and how it is read:
- the table's columns: taken from its header line (`size count type redop root time algbw busbw #wrong
  ...`), which names them in every era: no `root` and `error` (a largest deviation) in the old one,
  `#wrong` (a count) in the current one, `i_min i_max i_p99 i_cv%` with -I 1, tuning columns with -U 1;
  a block without a header is read by its shape (two equal groups of figures after the names);
- `N/A` in the wrong column: not checked (null); `#` lost from header lines in a copy; mpirun/srun tags;
- NCCL INFO lines anywhere, even inside a row (nccl-tests and NCCL share stdout): the row's pieces are
  joined back together and the log goes to that run's transport;
- runs: a new one at `# Collective test starting`, at `# nThread ...`, or at a command line naming a
  `*_perf` program, once the current run has rows; the op comes from those lines (or the file name);
  NCCL lines after a run concluded belong to the next run (another process starting it);
- the first nccl-tests (and NCCL 1's tests): `bytes N type op ... res` headers, rows behind `#`, time
  in milliseconds (converted; told by the units line, else by algbw = bytes / time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fabricbench.fabrics.transport import parse_nccl_log
from fabricbench.importing.base import (
    Source,
    dtype_name,
    nccl_version_from_code,
    number,
    op_name,
    strip_prefix,
)
from fabricbench.importing.collective import RunFacts, Side, record

TOOL = "nccl-tests"

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
_NUMERIC = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TIME_NAMES = ("time", "cputime")
_WRONG_NAMES = ("#wrong", "wrong", "error", "#error", "res", "#wrong?")
# the first nccl-tests' header names: "bytes N type op time algbw busbw res" (time in ms then)
_ALIASES = {"bytes": "size", "n": "count", "op": "redop", "elements": "count"}
_FILE_OPS = re.compile(r"(all[_-]?reduce|all[_-]?gather|reduce[_-]?scatter|all[_-]?to[_-]?all|broadcast|sendrecv)",
                       re.IGNORECASE)


def sniff(text: str) -> bool:
    return bool(re.search(r"(?m)^\W*\s*size\s+count\s+type\b|Collective test starting|nThread +\d+ +nGpus", text)
                or _ROW_SHAPE.search(text))


_ROW_SHAPE = re.compile(r"(?m)^(?:\S*:)?\s*\d+\s+\d+\s+(?:float|half|double|int8|uint8|int32|uint32|int64|uint64|"
                        r"bfloat16|char|int|f8e4m3|f8e5m2)\s+\S+\s+-?\d")


@dataclass(kw_only=True)
class Layout:
    """The table's columns: names before the first time column, then one group per placement."""

    preamble: list[str]
    sides: list[list[str]]

    @classmethod
    def of_header(cls, tokens: list[str]) -> Layout | None:
        names = [t for t in tokens if t != "timestamp"]
        starts = [i for i, t in enumerate(names) if t in _TIME_NAMES]
        if not starts:
            return None
        sides = [names[a:b] for a, b in zip(starts, starts[1:] + [len(names)])]
        return cls(preamble=names[:starts[0]], sides=sides)


@dataclass(kw_only=True)
class Run:
    index: int
    line: int  # where it starts (1-based)
    facts: RunFacts = field(default_factory=RunFacts)
    layout: Layout | None = None
    rows: list[tuple[int, list[str]]] = field(default_factory=list)  # (line, tokens)
    log: list[str] = field(default_factory=list)
    ranks: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # rank -> host, device, name
    started: bool = False  # saw "# Collective test starting"
    time_unit: str | None = None  # "us" or "ms", from the units line under the header
    first_era: bool = False  # a "bytes N type op" header: the first nccl-tests, which printed milliseconds
    configured: bool = False  # saw "# nThread ..."
    concluded: bool = False  # saw "# Collective test concluded"


def read(src: Source) -> list[dict[str, Any]]:
    runs: list[Run] = []
    run = Run(index=0, line=1)
    pending: list[str] = []  # a row's first pieces, cut by an NCCL line
    pending_line = 0
    # NCCL lines after a run concluded: another process's start of the next run (mpirun interleaves them),
    # or this run's teardown; they go to the next run if one starts, else stay with this one
    after: list[str] = []

    def new_run(line_no: int) -> Run:
        nonlocal run, after
        runs.append(run)
        run = Run(index=run.index + 1, line=line_no, log=after)
        after = []
        return run

    for line_no, raw in enumerate(src.text.splitlines(), 1):
        line = strip_prefix(raw.rstrip("\r\n"))
        m = _LOG_START.search(line)
        if m:
            (after if run.concluded else run.log).append(line[m.start():])
            before = line[:m.start()]
            if before.strip() and _NUMERIC.match(before.split()[0]) and not before.lstrip().startswith("#"):
                # a row cut by NCCL's line: "...  -1host:12:34 [0] NCCL INFO ..." (the host may be glued on)
                if not pending:
                    pending_line = line_no
                pending.extend(_split_glued(before.split()))
            continue
        body = line.strip()
        if not body:
            continue
        if pending:
            joined = pending + body.split()
            if _is_row(joined, run.layout):
                run.rows.append((pending_line, joined))
                pending = []
                continue
            if _is_row(body.split(), run.layout) or not _NUMERIC.match(body):
                src.warn(pending_line, f"skipped an incomplete table row ({' '.join(pending)})")
                pending = []
            else:  # a further piece of the same row (cut twice)
                pending = joined
                continue
        text = body.lstrip("#").strip()
        if not text:
            continue
        if _CONCLUDED.search(text):
            run.concluded = True
            continue
        m = _STARTING.search(text)
        if m:
            if run.rows or run.started or run.configured:
                new_run(line_no)
            run.started = True
            run.facts.op = op_name(m.group(1)) or run.facts.op
            continue
        m = _VERSION.search(text)
        if m:
            if run.rows:
                new_run(line_no)
            run.facts.tool_version = m.group(1)
            if m.group(3):
                run.facts.nccl_version = nccl_version_from_code(int(m.group(3)))
            continue
        m = _NTHREAD.search(text)
        if m:
            if run.rows or run.configured:
                new_run(line_no)
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
            continue
        m = _RANK.search(text)
        if m and text.startswith("Rank"):
            run.ranks[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(4))
            continue
        m = _DEVICE.match(text)
        if m:
            run.ranks[int(m.group(1))] = ("", int(m.group(2)), m.group(3))
            continue
        tokens = text.split()
        if tokens[0] == "(B)" or (tokens[0].startswith("(") and "(GB/s)" in tokens):
            run.time_unit = "ms" if "(ms)" in tokens else "us" if "(us)" in tokens else run.time_unit
            continue
        names = [_ALIASES.get(t.lower(), t) for t in tokens]
        if names[0] == "size" and "count" in names:
            run.first_era = tokens[0].lower() == "bytes"
            layout = Layout.of_header(names)
            if layout is None:
                src.warn(line_no, "a table header without a time column; its rows are read by their shape")
            if run.rows and run.layout is not None and layout is not None and layout != run.layout:
                new_run(line_no)  # another table in the same run's place: a new block
            run.layout = layout or run.layout
            continue
        if _is_row(tokens, run.layout):
            run.rows.append((line_no, tokens))
            continue
        if (len(tokens) >= 4 and tokens[0].isdigit() and tokens[1].isdigit() and not _NUMERIC.match(tokens[2])
                and (run.layout is not None or run.rows)):
            src.warn(line_no, f"skipped a table row that does not fit the table's {_width(run.layout)} columns "
                              f"({len(tokens)} values)")
            continue
        m = _PROGRAM.search(body)
        if m and op_name(m.group(1)) and not body.startswith("#"):
            # a command line (after a shell prompt, or mpirun's): the next run's program
            if run.rows:
                new_run(line_no)
            if not run.started:
                run.facts.op = op_name(m.group(1))
    if pending:
        src.warn(pending_line, f"skipped an incomplete table row at the end ({' '.join(pending)})")
    run.log += after
    runs.append(run)
    records: list[dict[str, Any]] = []
    number_of_run = 0
    file_op = _op_from_file_name(src.name)
    for r in runs:
        if not r.rows:
            continue
        records.extend(_records(src, r, number_of_run, file_op))
        number_of_run += 1
    return records


def _width(layout: Layout | None) -> str:
    return "?" if layout is None else str(len(layout.preamble) + sum(len(x) for x in layout.sides))


def _split_glued(tokens: list[str]) -> list[str]:
    """'-1host' (a row's last figure with NCCL's host name glued on) -> '-1'; other tokens as they are."""
    if tokens:
        m = _NUMERIC.match(tokens[-1])
        last = tokens[-1]
        if m and m.end() < len(last) and last != "N/A":
            tokens = tokens[:-1] + [last[:m.end()]]
    return tokens


def _is_row(tokens: list[str], layout: Layout | None) -> bool:
    return _parse_row(tokens, layout) is not None


def _parse_row(tokens: list[str], layout: Layout | None) -> tuple[dict[str, str], list[dict[str, str]]] | None:
    """A row's named cells: the preamble (size, count, type, redop, root) and one dict per placement."""
    if len(tokens) < 6 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    if layout is not None:
        pre = layout.preamble
        widths = [len(s) for s in layout.sides]
        need = len(pre) + sum(widths)
        # a time stamp column (-S 1) adds two tokens after the figures: allowed, ignored
        # -U 1 adds tuning columns whose cells are words: only each placement's time must be a figure
        starts = [len(pre) + sum(widths[:i]) for i in range(len(widths))]
        if len(tokens) in (need, need + 2) and all(_cell_ok(tokens[i]) for i in starts):
            head = dict(zip(pre, tokens))
            out, at = [], len(pre)
            for names, w in zip(layout.sides, widths):
                out.append(dict(zip(names, tokens[at:at + w])))
                at += w
            return head, out
    return _parse_shape(tokens)


def _cell_ok(t: str) -> bool:
    return t == "N/A" or bool(_NUMERIC.match(t)) or t.lower() in ("nan", "-nan", "inf", "-inf")


def _parse_shape(tokens: list[str]) -> tuple[dict[str, str], list[dict[str, str]]] | None:
    """A row without a usable header: size, count, names (type, redop), root if odd, then two groups."""
    i = 2
    names = []
    while i < len(tokens) and not _NUMERIC.match(tokens[i]) and tokens[i] != "N/A":
        names.append(tokens[i])
        i += 1
    if not names or len(names) > 2:
        return None
    rest = tokens[i:]
    head = {"size": tokens[0], "count": tokens[1], "type": names[0]}
    if len(names) == 2:
        head["redop"] = names[1]
    if len(rest) % 2 == 1:
        head["root"], rest = rest[0], rest[1:]
    if len(rest) not in (8, 16) or not all(_cell_ok(t) for t in rest):
        return None
    half = len(rest) // 2
    # no header to say whether the fourth column counts wrong elements or is the old era's deviation
    cols = ["time", "algbw", "busbw", "#wrong?"] + (["i_min", "i_max", "i_p99", "i_cv%"] if half == 8 else [])
    return head, [dict(zip(cols, rest[:half])), dict(zip(cols, rest[half:]))]


def _side(cells: dict[str, str]) -> Side:
    time_key = next((k for k in cells if k in _TIME_NAMES), None)
    s = Side(time_us=number(cells.get(time_key)), algbw=number(cells.get("algbw")),
             busbw=number(cells.get("busbw")))
    for k, v in cells.items():
        if k in _WRONG_NAMES:
            if v == "N/A":
                continue
            val = number(v)
            if val is None:
                continue
            # the old "error"/"res" column is a largest deviation ("0e+00", "2e-07"); "#wrong" is a count,
            # printed with %g (so "1e+06" for a million); under no header, e-notation below 1e5 is a deviation
            if k in ("error", "res", "#error"):
                s.max_error = val
            elif re.fullmatch(r"-?\d+", v) or (val == int(val) and (k != "#wrong?" or val >= 1e5)):
                s.wrong = int(val)
            else:
                s.max_error = val
        elif k == "i_min":
            s.min_us = number(v)
        elif k == "i_max":
            s.max_us = number(v)
        elif k == "i_p99":
            s.p99_us = number(v)
        elif k == "i_cv%":
            cv = number(v)
            s.cv = None if cv is None else cv / 100
        elif k not in (time_key, "algbw", "busbw"):
            s.extra[k.lstrip("#")] = number(v) if number(v) is not None else v
    return s


def _time_scale(run: Run, rows) -> float:
    """1 for microseconds, 1000 where the table printed milliseconds (the first nccl-tests and NCCL 1's
    tests did, under a header without units): told by the units line, else by algbw = bytes / time."""
    if run.time_unit is not None:
        return 1000.0 if run.time_unit == "ms" else 1.0
    ratios = []
    for _, (pre, sides) in rows:
        side = _side(sides[0])
        size = int(pre["size"])
        if side.time_us and side.algbw and size > 0:
            ratios.append(size / (side.time_us * 1e-6) / 1e9 / side.algbw)
    ratios.sort()
    if ratios:  # 1 for microseconds, 1000 for milliseconds (the printed algbw's rounding is far smaller)
        return 1000.0 if ratios[len(ratios) // 2] > 30 else 1.0
    return 1000.0 if run.first_era else 1.0


def _scaled(side: Side, scale: float) -> Side:
    def f(v):
        return None if v is None else round(v * scale, 6)

    side.time_us, side.min_us, side.max_us, side.p99_us = f(side.time_us), f(side.min_us), f(side.max_us), f(side.p99_us)
    side.extra["time_printed_in"] = "ms"
    return side


def _op_from_file_name(name: str) -> str | None:
    m = _FILE_OPS.search(name)
    return op_name(re.sub(r"[_-]", "", m.group(1).lower())) if m else None


def _records(src: Source, run: Run, index: int, file_op: str | None) -> list[dict[str, Any]]:
    facts = run.facts
    first = run.rows[0][0]
    if facts.op is None and file_op is not None:
        facts.op = file_op
        src.warn(first, f"run {index}: the op ({file_op}) is taken from the file name: nccl-tests did not print it")
    elif facts.op is None:
        src.warn(first, f"run {index}: nccl-tests did not say which collective this is (no '# Collective test "
                        f"starting' or *_perf command line): op left null")
    if run.ranks:
        ordered = [run.ranks[k] for k in sorted(run.ranks)]
        facts.gpus = [d for _, d, _ in ordered]
        facts.gpu_names = [n for _, _, n in ordered]
        facts.hosts = list(dict.fromkeys(h for h, _, _ in ordered if h))
    if run.log:
        facts.log = parse_nccl_log("\n".join(run.log))
        if facts.nccl_version is None:
            facts.nccl_version = facts.log.nccl_version
    told = facts.log.nranks if facts.log and facts.log.nranks else (max(run.ranks) + 1 if run.ranks else None)
    facts.nranks = src.ranks(told, first)
    head = src.header("collective", index, tool=TOOL, tool_version=facts.tool_version, line=first,
                      host=facts.host, timestamp=facts.timestamp)
    out = []
    parsed_rows = [(line_no, _parse_row(tokens, run.layout)) for line_no, tokens in run.rows]
    scale = _time_scale(run, parsed_rows)
    for line_no, parsed in parsed_rows:
        assert parsed is not None  # only rows that parsed were kept
        pre, sides = parsed
        size, count = int(pre["size"]), int(pre["count"])
        root = pre.get("root")
        root_v = int(root) if root is not None and re.fullmatch(r"-?\d+", root) else None
        redop = pre.get("redop")
        placements = [False, True] if len(sides) >= 2 else [True]
        for inplace, cells in zip(placements, sides):
            side = _side(cells)
            if scale != 1:
                side = _scaled(side, scale)
            if side.time_us is None and side.algbw is None and side.busbw is None:
                continue  # a placement nccl-tests left blank (trace replay prints in-place only)
            rec = record(dict(head, source={**head["source"], "line": line_no}), facts, nbytes=size, count=count,
                         dtype=dtype_name(pre["type"]), redop=None if redop in (None, "none") else redop,
                         root=None if root_v is None or root_v < 0 else root_v, inplace=inplace, side=side)
            out.append(rec)
    return out
