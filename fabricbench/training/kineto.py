"""Reading a torch.profiler (Kineto) chrome trace of any training loop, in bounded memory.

    fabricbench relate --trace prof/ sweeps.jsonl        (relating/usertrace.py reads each rank's file here)

A Kineto trace is one JSON object whose `traceEvents` array holds every event (1 GB and more for a long
profile of a large model). Loading it whole takes ~10x its size in Python objects, so `scan` reads the file
as a stream: the top-level keys other than `traceEvents` are decoded as they come (small: distributedInfo,
host_name), and the array one event at a time (json.JSONDecoder.raw_decode on a window of the text, so each
event is decoded in C and dropped unless kept). .json.gz is decompressed on the fly.

What one pass keeps (`Scan`), of the first MAX_STEPS profiled steps (a longer profile's later steps are
passed over, and said): the few events the communication is read from (the steps, every c10d /
functional collective op, `record_param_comms`, gloo's and NCCL's own events and NCCL's kernels) and one
event of each thread that ran backward (autograd's), which says where the step's compute runs. The
compute itself is measured in a second pass against the steps (training/kinetoline.py); of it only the
compute kernels' intervals are held (16 bytes a kernel), never the host's ops.
Peak memory on a 1 GB trace: benchmarks/trace/README.md.

Names differ between PyTorch versions, and are mapped here to one vocabulary (what fabricbench's own runs
write, training/trace.py and timeline.py): the step annotation `ProfilerStep#N` becomes timeline.STEP_MARK
(its N kept as `step`); categories are lower-cased, and the old `Operator` is `cpu_op`.

A file that is not such a trace (no traceEvents array, cut short, not JSON, not gzip it says it is) is a
UsageError naming the file and what to do.
"""

from __future__ import annotations

import bisect
import codecs
import gzip
import json
import re
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from fabricbench.errors import UsageError
from fabricbench.files import check_input
from fabricbench.training.timeline import AUTOGRAD_MARK, STEP_MARK
from fabricbench.training.matching import OP_RULES

CHUNK = 1 << 18  # characters read at a time (the window of text held is about twice this)
MAX_EVENT = 64 << 20  # one event (or one top-level value) larger than this is not a profiler's
# profiled steps read: their median and spread are what relate takes of a trace, and a hundred steps
# give them; past that, what the reader keeps (~1 KB a collective) would grow with the profile's length
MAX_STEPS = 100
STEP_PREFIX = "ProfilerStep#"
CATEGORIES = {"operator": "cpu_op"}  # old category names -> today's (lower-cased first)
# old op namespaces -> today's: the functional collectives were `c10d_functional::` before torch 2.2
NAMESPACES = {"c10d_functional::": "_c10d_functional::"}
# the args of a kept event that anything downstream reads (the rest is dropped: a kernel's launch geometry)
KEEP_ARGS = ("Input Dims", "Input type", "Concrete Inputs", "Collective name", "In msg nelems", "Out msg nelems",
             "Group size", "dtype", "In msg size", "Out msg size", "stream")
# words of a host event's name that say "collective" in any PyTorch's spelling: one of these that is not
# read is named when a trace yields no collective (another version's names, to be mapped above)
COMM_WORDS = re.compile(r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|nccl|gloo|c10d", re.I)
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")


@dataclass(kw_only=True)
class Scan:
    """What one trace file holds that relate reads (module docstring)."""

    path: str
    header: dict[str, Any] = field(default_factory=dict)  # the top-level keys but traceEvents
    kept: list[dict[str, Any]] = field(default_factory=list)  # normalised (step marks renamed)
    autograd_tids: set[Any] = field(default_factory=set)  # threads that ran backward
    events: int = 0  # events read
    cpu_span: tuple[float, float] | None = None  # first start and last end of the host's ops
    busiest_tid: Any = None  # the thread with the most aten:: time (the step's, where no step is marked)
    has_cuda: bool = False  # any kernel or GPU memcpy: the trace ran on GPU
    # per stream (the kernels' tid), the compute kernels' (start, end), flat: 16 bytes a kernel, so that
    # the second pass (kinetoline.py) need not read the file once per stream
    kernel_runs: dict[Any, array] = field(default_factory=dict)
    unknown_comm: dict[str, int] = field(default_factory=dict)  # host events named like a collective, not read
    steps_seen: int = 0  # ProfilerStep#N marks in the file (the first max_steps are read)

    @property
    def distributed(self) -> dict[str, Any]:
        d = self.header.get("distributedInfo")
        return d if isinstance(d, dict) else {}


def category(e: dict[str, Any]) -> str:
    """An event's category in today's spelling."""
    cat = str(e.get("cat") or "").lower()
    return CATEGORIES.get(cat, cat)


def _kept(name: str, cat: str) -> bool:
    if cat == "kernel":
        return "nccl" in name.lower()
    return (name in OP_RULES or name == "record_param_comms" or name.startswith(("gloo:", "nccl:", STEP_PREFIX)))


def _open(path: Path) -> BinaryIO:
    fh = path.open("rb")
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh)  # type: ignore[return-value]
    return fh


class _Text:
    """A window over the file's text: `buf[pos:]` unread; more() reads the next chunk; False at the end."""

    def __init__(self, raw: BinaryIO, path: Path) -> None:
        self.raw, self.path = raw, path
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.buf, self.pos, self.eof = "", 0, False

    def more(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.raw.read(CHUNK)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
            raise UsageError(f"trace {self.path}: the compressed file is damaged or cut short ({_why(e)}); "
                             f"copy the whole file again, or give the uncompressed .json") from None
        try:
            text = self.dec.decode(data, final=not data)
        except UnicodeDecodeError:
            raise UsageError(f"trace {self.path}: not UTF-8 text; give a torch.profiler chrome trace "
                             f"(.json or .json.gz, prof.export_chrome_trace)") from None
        if not data:
            self.eof = True
        if self.pos > CHUNK:
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += text
        return bool(data)

    def skip_ws(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise self.broken(what)
        self.pos += 1
        return c

    def value(self, decoder: json.JSONDecoder) -> Any:
        self.skip_ws()
        while True:
            try:
                v, end = decoder.raw_decode(self.buf, self.pos)
                # a number at the window's edge may go on in the next chunk
                if end < len(self.buf) or self.eof:
                    self.pos = end
                    return v
            except json.JSONDecodeError as e:
                if len(self.buf) - self.pos > MAX_EVENT:
                    raise self.broken(f"a value under {MAX_EVENT >> 20} MiB") from None
                if self.eof:
                    raise self.broken("a complete JSON value", cut=not self.buf.rstrip().endswith("}")) from None
            self.more()

    def broken(self, expected: str, cut: bool = False) -> UsageError:
        """The error for what is not there: the file cut short where it ends before its value (or the
        whole object) does, else the text found instead."""
        if self.eof and (cut or self.pos >= len(self.buf.rstrip())):
            return UsageError(f"trace {self.path}: the file ends before its traceEvents array does (cut short?); "
                              f"profile again and let export_chrome_trace finish")
        near = self.buf[self.pos:self.pos + 40].replace("\n", " ")
        return UsageError(f"trace {self.path}: expected {expected} at {near!r}; give a torch.profiler chrome "
                          f"trace (.json or .json.gz)")


def _why(e: BaseException) -> str:
    return str(e) or type(e).__name__


def events(path: str | Path, header: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every event of the trace's traceEvents array, one at a time; the other top-level keys go to
    `header` (those after the array once it is read). UsageError for a file that is not such a trace."""
    p = check_input(path, what="trace")
    header = {} if header is None else header
    decoder = json.JSONDecoder()
    with _open(p) as raw:
        t = _Text(raw, p)
        if t.skip_ws() != "{":
            raise UsageError(f"trace {p}: not a JSON object; give a torch.profiler chrome trace (.json or .json.gz, "
                             f"prof.export_chrome_trace)")
        t.pos += 1
        seen = False
        while True:
            c = t.skip_ws()
            if c == "}":
                break
            key = t.value(decoder)
            if not isinstance(key, str):
                raise t.broken("a key")
            t.expect(":", "':'")
            if key != "traceEvents":
                header[key] = t.value(decoder)
            else:
                seen = True
                t.expect("[", "the traceEvents array")
                if t.skip_ws() == "]":
                    t.pos += 1
                else:
                    yield from _array(t, decoder)
            if t.expect(",}", "',' or '}'") == "}":
                break
        if not seen:
            raise UsageError(f"trace {p}: no traceEvents array; give a torch.profiler chrome trace "
                             f"(prof.export_chrome_trace), not another JSON file")


def _array(t: _Text, decoder: json.JSONDecoder) -> Iterator[dict[str, Any]]:
    """The events of the array whose first one starts at t.pos, up to and past its closing ']'. The usual
    case (a whole event in the window, then a comma) takes one C call and one regex match per event; the
    window's end, a value that is not an object and the array's end take the careful path."""
    scan_once, buf, pos = decoder.scan_once, t.buf, t.pos
    while True:
        if buf[pos:pos + 1] == "{":
            try:
                ev, end = scan_once(buf, pos)
            except (StopIteration, json.JSONDecodeError):
                ev = None
            if ev is not None and (end < len(buf) or t.eof):  # an object is whole once its '}' is read
                yield ev
                m = _SEP.match(buf, end)
                if m is not None:
                    pos = m.end()
                    continue
                t.pos = end
                if t.expect(",]", "',' or ']' between events") == "]":
                    return
                t.skip_ws()
                buf, pos = t.buf, t.pos
                continue
        t.pos = pos  # the careful path: more text, or the error that says what is wrong
        t.skip_ws()
        ev = t.value(decoder)
        if isinstance(ev, dict):
            yield ev
        if t.expect(",]", "',' or ']' between events") == "]":
            return
        t.skip_ws()
        buf, pos = t.buf, t.pos


class _FirstSteps:
    """The starts of the first `n` + 1 step windows seen so far; events from the (n+1)-th's start on
    belong to steps that are not read. A step that comes later in the file but earlier in time only moves
    that start earlier, so what was passed over is never needed."""

    def __init__(self, n: int) -> None:
        self.n, self.starts, self.seen = n, [], 0
        self.cutoff = float("inf")

    def add(self, ts: float) -> None:
        self.seen += 1
        bisect.insort(self.starts, ts)
        del self.starts[self.n + 1:]
        if len(self.starts) > self.n:
            self.cutoff = self.starts[self.n]


def _before(kept: list[dict[str, Any]], cutoff: float) -> list[dict[str, Any]]:
    """The kept events of the steps read (and the threads' autograd marks, which name a thread, not a step)."""
    return [e for e in kept if e["ts"] < cutoff or e["name"] == AUTOGRAD_MARK]


def scan(path: str | Path, max_steps: int = MAX_STEPS) -> Scan:
    """One pass over the trace (module docstring): the first `max_steps` profiled steps are read."""
    out = Scan(path=str(path))
    first = _FirstSteps(max_steps)
    prune_at = 4096
    aten: dict[Any, float] = {}
    lo, hi = float("inf"), float("-inf")
    for e in events(path, out.header):
        out.events += 1
        if e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur") or 0.0)
        except (KeyError, TypeError, ValueError):
            continue
        name = str(e.get("name", ""))
        for old, new in NAMESPACES.items():
            if name.startswith(old):
                name = new + name[len(old):]
        cat = category(e)
        tid = e.get("tid")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            out.has_cuda = True
            if cat == "kernel" and "nccl" not in name.lower() and ts < first.cutoff:
                run = out.kernel_runs.setdefault(tid, array("d"))
                run.append(ts)
                run.append(ts + dur)
        elif cat != "gpu_user_annotation":
            if name.startswith("aten::"):
                aten[tid] = aten.get(tid, 0.0) + dur
            elif name.startswith(AUTOGRAD_MARK) and tid not in out.autograd_tids:
                out.autograd_tids.add(tid)  # one kept: it says which thread ran backward (timeline.py)
                out.kept.append({"ph": "X", "cat": cat, "name": AUTOGRAD_MARK, "pid": e.get("pid"), "tid": tid,
                                 "ts": ts, "dur": dur, "args": {}})
            if cat in ("cpu_op", "user_annotation", "") and not name.startswith(STEP_PREFIX):
                lo, hi = min(lo, ts), max(hi, ts + dur)
        if cat == "gpu_user_annotation" or not _kept(name, cat):
            if cat in ("cpu_op", "user_annotation") and not name.startswith("aten::") and COMM_WORDS.search(name) \
                    and len(out.unknown_comm) < 20:
                out.unknown_comm[name] = out.unknown_comm.get(name, 0) + 1
            continue
        if name.startswith(STEP_PREFIX):
            first.add(ts)
        if ts >= first.cutoff:
            continue  # a step past the first max_steps
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        kept = {"ph": "X", "cat": cat, "name": name, "pid": e.get("pid"), "tid": tid, "ts": ts, "dur": dur,
                "args": {k: args[k] for k in KEEP_ARGS if k in args}}
        if name.startswith(STEP_PREFIX):
            kept["name"] = STEP_MARK
            n = name[len(STEP_PREFIX):]
            kept["step"] = int(n) if n.isdigit() else None
        out.kept.append(kept)
        if len(out.kept) > prune_at:
            out.kept = _before(out.kept, first.cutoff)
            prune_at = 2 * len(out.kept) + 4096
    out.kept = _before(out.kept, first.cutoff)
    out.steps_seen = first.seen
    if hi > lo:
        out.cpu_span = (lo, hi)
    out.busiest_tid = max(aten, key=aten.__getitem__) if aten else None
    return out
