"""Reading results files back: one tolerant reader every command shares, with typed checks per record kind.

    fabricbench relate sweeps.jsonl train.jsonl     (relate, report, advise --results, qualify, --resume)

A results file comes from another machine, a run cut short or a hand edit. Any byte sequence gives
either records (plus one warning per line skipped), or one UsageError line:
- a line that is not a JSON object, or not a fabricbench record, is skipped with a warning;
- a record whose fields have the wrong JSON type for its kind, or a value physics does not allow (a
  negative count, a fraction above 1, a time of 0, bytes that are not whole elements: results/fields.py),
  or whose status is not one its kind can carry (results/status.py), is skipped with one warning naming
  the file, the line and the field, so no reader below ever meets a string where it expects a number;
- a record of a newer schema (fabricbench/99) is an error: its fields may mean something else;
- non-finite numbers (NaN, Infinity, 1e999) are read as null, as the writers write them.

Typed, per kind: `read_typed(path, CollectiveResult)` (or TrainResult, or qualify's Verdict: a type that
names its KIND and has from_record), `Records.typed(cls)`, and `typed(recs, cls)` for records already in
memory (a child's), checked as a line of a file is. A reader of one kind's fields should take them from
these rather than check a dict again (qualify's train check and --fleet's verdicts do); dicts are made
once, by to_dict, where a record is written.

A writer about to append (the resume store) repairs the file first: results/repair.py.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TypeVar

from fabricbench.errors import UsageError
from fabricbench.files import open_input
from fabricbench.results.fields import HEADER, KINDS, field_problem, value_name
from fabricbench.results.status import KIND_STATUSES, parse as parse_status

SCHEMA_PREFIX = "fabricbench/"
READS_VERSION = 1  # the newest record schema this reader understands (results/schema.SCHEMA_VERSION)
MAX_NESTING = 64  # deeper JSON is not a record (and would exhaust Python's recursion)

# Records `fabricbench import` made from another tool's output say only what that output told: these
# fields may be null there (an nccl-tests table names no op, nvbandwidth prints no buffer size).
IMPORTED_MAY_BE_NULL = frozenset({"op", "nranks", "bytes"})


def imported(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("source"), dict) and isinstance(rec["source"].get("tool"), str)


T = TypeVar("T")


@dataclass(kw_only=True)
class Records:
    """What a results file held: the records read, and one warning per line skipped."""

    path: str
    records: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: int = 0  # non-empty lines seen
    torn_tail: bool = False  # the last line had no newline and did not parse (a crash mid-write)

    def __iter__(self):
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def typed(self, cls: type[T]) -> list[T]:
        """The records of cls.KIND as cls (cls.from_record: CollectiveResult, TrainResult, qualify's
        Verdict), their status the Status enum: what a command reads fields from, instead of a dict it
        checks again. A record the type cannot hold (from_record gives None) is left out."""
        out = []
        for rec in self.of_kind(cls.KIND):
            got = cls.from_record(rec)
            if got is not None:
                out.append(got)
        return out


def _finite(text: str) -> float | None:
    v = float(text)
    return v if math.isfinite(v) else None


def _int64(text: str) -> int | None:
    # no writer writes a whole number past 64 bits; a bigger one would overflow every float() below
    return int(text) if len(text) <= 19 else (v if abs(v := int(text)) < 2**63 else None)


def loads_record(line: str) -> Any:
    """json.loads with NaN/Infinity/1e999 and whole numbers past 64 bits read as null.
    Raises ValueError (JSONDecodeError) or RecursionError."""
    return json.loads(line, parse_constant=lambda _: None, parse_float=_finite, parse_int=_int64)


def _depth(v: Any, limit: int) -> int:
    stack, depth = [(v, 1)], 0
    while stack:
        x, d = stack.pop()
        depth = max(depth, d)
        if depth > limit:
            return depth
        if isinstance(x, dict):
            stack.extend((y, d + 1) for y in x.values())
        elif isinstance(x, list):
            stack.extend((y, d + 1) for y in x)
    return depth


def schema_version(rec: dict[str, Any]) -> int | None:
    """The N of "fabricbench/N", or None when the record names no fabricbench schema."""
    s = rec.get("schema")
    if not isinstance(s, str) or not s.startswith(SCHEMA_PREFIX):
        return None
    try:
        return int(s[len(SCHEMA_PREFIX):])
    except ValueError:
        return None


def check_record(rec: Any) -> str | None:
    """Why `rec` is not a readable fabricbench record (None when it is). A newer schema raises UsageError."""
    if not isinstance(rec, dict):
        return f"{value_name(rec)}, not a record (a JSON object)"
    version = schema_version(rec)
    if version is None:
        return f"not a fabricbench record (schema {str(rec.get('schema'))[:40]!r})"
    if version > READS_VERSION:
        raise UsageError(f"records of schema {rec['schema']} are newer than this fabricbench reads "
                         f"({SCHEMA_PREFIX}{READS_VERSION}); upgrade fabricbench to read them")
    if version < 1:
        return f"unknown schema {rec['schema']}"
    why = field_problem(rec, HEADER)
    if why:
        return why
    kind = rec["kind"]
    registered = KINDS.get(kind)
    spec = registered.fields if registered is not None else None
    if spec is not None and imported(rec):
        spec = {(k.rstrip("!") if k.rstrip("!") in IMPORTED_MAY_BE_NULL else k): v for k, v in spec.items()}
    if spec is not None:
        why = field_problem(rec, spec)
        if why:
            return f"{kind} record: {why}"
    has_status = rec.get("status") is not None or "status!" in (spec or {})
    if kind in KIND_STATUSES and has_status and parse_status(rec.get("status"), kind) is None:
        return f"{kind} record: status {str(rec.get('status'))[:40]!r} is not one a {kind} record can have"
    why = registered.check(rec) if registered is not None and registered.check else None
    if why:
        return f"{kind} record: {why}"
    return None


def parse_lines(text: str, *, source: str = "results file") -> Records:
    """Records from JSONL text (see the module docstring for what is skipped and what is an error)."""
    out = Records(path=source)
    lines = text.split("\n")
    last = len(lines) - 1
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        out.lines += 1
        try:
            rec = loads_record(line)
        except (ValueError, RecursionError):
            if n - 1 == last:
                out.torn_tail = True
                out.warnings.append(f"{source}: line {n} is cut short (a run stopped mid-write); skipped")
            else:
                out.warnings.append(f"{source}: line {n} is not JSON; skipped")
            continue
        if _depth(rec, MAX_NESTING) > MAX_NESTING:
            out.warnings.append(f"{source}: line {n} is nested deeper than {MAX_NESTING}; skipped")
            continue
        why = check_record(rec)
        if why:
            out.warnings.append(f"{source}: line {n}: {why}; skipped")
            continue
        out.records.append(rec)
    return out


def read(path: str | os.PathLike, *, kind: str | Iterable[str] | None = None, what: str = "results file",
         missing_ok: bool = False) -> Records:
    """Every readable record of a results file (optionally of one kind or kinds), and warnings for the rest.

    A missing file is a UsageError unless missing_ok (then no records); FIFOs, devices, folders and files
    over the size cap are refused before they are opened (fabricbench/files.py).
    """
    p = Path(path)
    if missing_ok and not os.path.lexists(p):
        return Records(path=str(p))
    with open_input(p, what=what) as fh:
        try:
            text = fh.read()
        except (OSError, MemoryError) as e:
            raise UsageError(f"{what} {p}: cannot read it ({getattr(e, 'strerror', None) or type(e).__name__})") \
                from None
    got = parse_lines(text, source=str(p))
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind)
        got.records = [r for r in got.records if r.get("kind") in kinds]
    return got


def typed(recs: Iterable[Any], cls: type[T], *, source: str = "records") -> tuple[list[T], list[str]]:
    """Records already in memory (a child's, a library caller's) of cls.KIND, checked as a file's lines
    are (check_record) and typed (cls.from_record); one warning per record of that kind left out."""
    got = Records(path=source)
    for n, rec in enumerate(recs, 1):
        if not isinstance(rec, dict) or rec.get("kind") != cls.KIND:
            continue
        why = check_record(rec) if _depth(rec, MAX_NESTING) <= MAX_NESTING else "nested too deep"
        if why:
            got.warnings.append(f"{source}: record {n}: {why}; skipped")
        else:
            got.records.append(rec)
    return got.typed(cls), got.warnings


def read_typed(path: str | os.PathLike, cls: type[T], *, what: str = "results file",
               missing_ok: bool = False) -> tuple[list[T], list[str]]:
    """The records of one kind of a results file, typed (Records.typed), and one warning per line skipped."""
    got = read(path, kind=cls.KIND, what=what, missing_ok=missing_ok)
    return got.typed(cls), got.warnings


def read_nonempty(path: str | os.PathLike, *, what: str = "results file", kind: str | None = None) -> Records:
    """`read`, but a file with no fabricbench record at all is a UsageError (for commands that need some)."""
    got = read(path, what=what)
    if not got.records:
        why = f" ({got.warnings[0].split(': ', 1)[-1]})" if got.warnings else ""
        raise UsageError(f"{what} {path}: no fabricbench records in it{why}; give a file written by --out")
    if kind is not None:
        got.records = [r for r in got.records if r.get("kind") == kind]
    return got
