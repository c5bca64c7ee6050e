"""Reading results files back: one tolerant reader every command shares, with typed checks per record kind.

    fabricbench relate sweeps.jsonl train.jsonl     (relate, report, advise --results, qualify, --resume)

A results file comes from another machine, a run cut short or a hand edit. Any byte sequence gives
either records (plus one warning per line skipped), or one UsageError line:
- a line that is not a JSON object, or not a fabricbench record, is skipped with a warning;
- a record whose fields have the wrong JSON type for its kind (FIELDS), or whose status is not one its
  kind can carry (results/status.py), is skipped with a warning naming the field, so no reader below
  ever meets a string where it expects a number;
- a record of a newer schema (fabricbench/99) is an error: its fields may mean something else;
- non-finite numbers (NaN, Infinity, 1e999) are read as null, as the writers write them.

Typed, per kind: `read_typed(path, CollectiveResult)` (or TrainResult, or qualify's Verdict: a type that
names its KIND and has from_record), `Records.typed(cls)`, and `typed(recs, cls)` for records already in
memory (a child's), checked as a line of a file is. A reader of one kind's fields should take them from
these rather than check a dict again (qualify's train check and --fleet's verdicts do); dicts are made
once, by to_dict, where a record is written.

The resume store calls `repair` first: a torn last line (a crash mid-write) is cut off so that every line
of the file parses and the measurement is done again; damaged lines further up are moved aside to
FILE.unreadable, never deleted.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TypeVar

from fabricbench.errors import UsageError
from fabricbench.files import OutputError, check_input, open_input, write_text_atomic
from fabricbench.results.status import KIND_STATUSES, parse as parse_status, parse_severity

SCHEMA_PREFIX = "fabricbench/"
READS_VERSION = 1  # the newest record schema this reader understands (results/schema.SCHEMA_VERSION)
MAX_NESTING = 64  # deeper JSON is not a record (and would exhaust Python's recursion)

# --- field types per kind ----------------------------------------------------------------------------
# A spec is a type (str, int, float = any number, bool, dict, list), a tuple of specs (any of them),
# a dict (an object whose listed keys, where present and not null, match), or a one-element list
# (a list whose items match; null items only where they are numbers). Keys ending in "!" must be present
# and not null.
NUM = float
_STUDY_TAG = {"unit": str, "attempt": (str, int)}
_HEADER = {"schema!": str, "kind!": str, "run_id": str, "timestamp": str, "fabric": str, "host": str, "env": dict,
           "study": _STUDY_TAG}

# the fabric's facts a study writes onto its records (study/runner._facts); a train run writes the first two
_FACTS = {"fabric_env": dict, "shaped_rate_bps": NUM, "netns": str}

FIELDS: dict[str, dict[str, Any]] = {
    "collective": {
        "op!": str, "dtype": str, "bytes!": int, "requested_bytes": int, "count": int, "nranks!": int,
        "gpus": [int], "inplace": bool, "graph": bool, "iters": int, "time_us": NUM, "mean_us": NUM,
        "min_us": NUM, "max_us": NUM, "p95_us": NUM, "cv": NUM, "ci95_rel": NUM, "algbw_gbps": NUM,
        "busbw_gbps": NUM, "busbw_factor": NUM, "wrong": int, "status!": str, "message": str, "engine": str,
        "backend": str, "transport": str, "gpu_names": [str], "transport_mismatch": str, **_FACTS,
        "extra": {"settings": dict, "topology_gpus": [int], "placement_gpus": [int], "hosts": [str]},
    },
    "copy": {"bytes!": int, "time_us": NUM, "min_us": NUM, "max_us": NUM, "gbps": NUM, "copy_kind": str,
             "direction": str, "src": str, "dst": str, "gpus": [int], "iters": int, "peer_access": bool, "extra": dict},
    "train": {
        "strategy!": str, "model": str, "status!": str, "message": str, "nranks": int, "world_size": int,
        "batch_size": int, "global_batch": int, "seq_len": int, "image_size": int, "device": str,
        "gpus": [int], "precision": str, "mixed_precision": str, "steps": int, "params": int,
        "step_time": {"median_s": NUM, "mean_s": NUM, "p95_s": NUM, "cv": NUM, "ci95_rel": NUM},
        "throughput": {"samples_per_s": NUM, "tokens_per_s": NUM, "mfu": NUM},
        "memory": {"max_reserved_bytes": int, "max_allocated_bytes": int},
        "comm": {"world_size": int, "collectives": [{"bytes!": NUM, "calls_per_step": NUM, "group_size": int,
                                                      "dtype": str, "op!": str}],
                 "timeline": {"exposed_fraction": NUM, "step_s": NUM}},
        "losses": [NUM], "step_times_s": [NUM], **_FACTS, "first_loss": NUM, "last_loss": NUM, "gpu_busy_fraction": NUM,
    },
    "verdict": {"check!": str, "check_kind": str, "status!": str, "severity": str, "code": str, "criterion": str,
                "subject": str, "reason": str, "unit": str, "sense": str, "margin": NUM, "duration_s": NUM,
                "action": str, "items": [{"criterion!": str, "status!": str}], "attempts": [dict]},
    "qualify_unit": {"key!": str, "status": str, "error": str, "waived": str, "transport": str,
                     "transport_mismatch": str, "facts": dict, "nrecords": int},
    "study_unit": {"name!": str, "status!": str, "unit_kind": str, "attempt": (str, int), "duration_s": NUM,
                   "message": str, "commands": [str], "records": int, "fabric": str},
    "plan": {"study": dict},
    "machine": {"gpus": [{"ordinal": int, "name": str, "memory_total_bytes": int}], "topology": dict},
    "topology": {"gpus": list, "links": list, "islands": list},
    "relate": {"rows": [dict]},
    # imported health (results/health.py): NCCL RAS per communicator, DCGM diag per test and entity
    "health": {"check!": str, "healthy!": bool, "comm_hash": str, "nranks": int, "ranks_reporting": int,
               "findings": [{"kind!": str, "detail": str, "ranks": [dict], "counts": dict}], "extra": dict},
    "diag": {"test!": str, "result!": str, "category": str, "entity_group": str, "entity_id": int,
             "errors": [{"error_id": int, "category": int, "severity": int, "message": str}], "info": [str],
             "figures": [{"name!": str, "value!": NUM, "unit": str}], "extra": dict},
}


# Records `fabricbench import` made from another tool's output say only what that output told: these
# fields may be null there (an nccl-tests table names no op, nvbandwidth prints no buffer size).
IMPORTED_MAY_BE_NULL = frozenset({"op", "nranks", "bytes"})


def flat_types(kind: str | None, key: str) -> tuple[type, ...]:
    """The Python types a top-level field of a kind may have (bool is never a number), from FIELDS and the
    header: for a reader that checks a few fields one level deep (qualify --fleet's streamed lines)."""
    spec = next((s for k, s in (*FIELDS.get(kind or "", {}).items(), *_HEADER.items())
                 if k.rstrip("!") == key), None)
    assert spec is not None, f"{kind}.{key} is not in results/records.FIELDS"

    def types(s: Any) -> tuple[type, ...]:
        if isinstance(s, tuple):
            return tuple(t for x in s for t in types(x))
        if isinstance(s, dict):
            return (dict,)
        if isinstance(s, list):
            return (list,)
        return (int, float) if s is float else (s,)
    return types(spec)


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


def _type_ok(v: Any, spec: Any) -> bool:
    if spec is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if spec is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if isinstance(spec, type):
        return isinstance(v, spec)
    if isinstance(spec, tuple):
        return any(_type_ok(v, s) for s in spec)
    if isinstance(spec, list):
        return isinstance(v, list)
    if isinstance(spec, dict):
        return isinstance(v, dict)
    raise AssertionError(f"bad field spec {spec!r}")


def field_problem(value: Any, spec: Any, where: str = "") -> str | None:
    """The first field of `value` that does not match `spec` ("step_time.median_s is a str, not a number"),
    or None when it matches."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where or 'record'} is {_name(value)}, not an object"
        for key, sub in spec.items():
            required = key.endswith("!")
            key = key.rstrip("!")
            here = f"{where}.{key}" if where else key
            v = value.get(key)
            if v is None:
                if required:
                    return f"{here} is missing"
                continue
            if isinstance(sub, (dict, list)) and _type_ok(v, sub):
                why = field_problem(v, sub, here)
                if why:
                    return why
            elif not _type_ok(v, sub):
                return f"{here} is {_name(v)}, not {_want(sub)}"
        return None
    if isinstance(spec, list):
        for i, item in enumerate(value):
            if item is None:
                if isinstance(spec[0], dict):  # a null is a non-finite number read back, never an object
                    return f"{where}[{i}] is null, not an object"
                continue
            if not _type_ok(item, spec[0]):
                return f"{where}[{i}] is {_name(item)}, not {_want(spec[0])}"
            if isinstance(spec[0], dict):
                why = field_problem(item, spec[0], f"{where}[{i}]")
                if why:
                    return why
        return None
    return None if _type_ok(value, spec) else f"{where} is {_name(value)}, not {_want(spec)}"


def _name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a whole number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _want(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_want(s) for s in spec)
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, dict):
        return "an object"
    return {str: "a string", int: "a whole number", float: "a number", bool: "true/false", dict: "an object",
            list: "a list"}[spec]


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
        return f"{_name(rec)}, not a record (a JSON object)"
    version = schema_version(rec)
    if version is None:
        return f"not a fabricbench record (schema {str(rec.get('schema'))[:40]!r})"
    if version > READS_VERSION:
        raise UsageError(f"records of schema {rec['schema']} are newer than this fabricbench reads "
                         f"({SCHEMA_PREFIX}{READS_VERSION}); upgrade fabricbench to read them")
    if version < 1:
        return f"unknown schema {rec['schema']}"
    why = field_problem(rec, _HEADER)
    if why:
        return why
    kind = rec["kind"]
    spec = FIELDS.get(kind)
    if spec is not None and imported(rec):
        spec = {(k.rstrip("!") if k.rstrip("!") in IMPORTED_MAY_BE_NULL else k): v for k, v in spec.items()}
    if spec is not None:
        why = field_problem(rec, spec)
        if why:
            return f"{kind} record: {why}"
    has_status = rec.get("status") is not None or "status!" in (spec or {})
    if kind in KIND_STATUSES and has_status and parse_status(rec.get("status"), kind) is None:
        return f"{kind} record: status {str(rec.get('status'))[:40]!r} is not one a {kind} record can have"
    if kind == "verdict" and rec.get("severity") is not None and parse_severity(rec["severity"]) is None:
        return f"verdict record: severity {str(rec['severity'])[:40]!r} is not a severity"
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


def repair(path: str | os.PathLike) -> list[str]:
    """Make every line of a results file parse, for a writer about to append to it (--resume).

    A torn last line (no newline, not JSON: a crash mid-write) is cut off, so its measurement is done
    again. Other lines that do not parse are moved to PATH.unreadable (appended) and the file rewritten
    atomically without them. Returns one warning per line moved or cut; [] when the file was whole or
    does not exist. A newline is added after a last record that lacks one, so the next append starts a
    line of its own.
    """
    p = Path(path)
    if not os.path.lexists(p):
        return []
    check_input(p, what="results file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise UsageError(f"results file {p}: cannot read it ({e.strerror})") from None
    raw = data.split(b"\n")
    keep: list[bytes] = []
    bad: list[bytes] = []
    warnings: list[str] = []
    cut_tail = False
    for i, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            rec = loads_record(line.decode("utf-8"))
            ok = isinstance(rec, dict)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            ok = False
        if ok:
            keep.append(line)
        elif i == len(raw) - 1:
            cut_tail = True
            warnings.append(f"results file {p}: its last line was cut short (a run stopped mid-write); "
                            f"removed, and that measurement is done again")
        else:
            bad.append(line)
            warnings.append(f"results file {p}: line {i + 1} does not parse; moved to {p.name}.unreadable")
    if not bad and not cut_tail and (not data or data.endswith(b"\n")):
        return []
    try:
        if not bad:
            # only the tail: truncate in place (no rewrite of a large file) and end with a newline
            end = data.rfind(b"\n") + 1 if cut_tail else len(data)
            with open(p, "r+b") as fh:
                fh.truncate(end)
                if end and data[end - 1:end] != b"\n":
                    fh.seek(end)
                    fh.write(b"\n")
            return warnings
        with open(p.with_name(p.name + ".unreadable"), "ab") as fh:
            fh.write(b"".join(b + b"\n" for b in bad))
        write_text_atomic(p, "".join(b.decode("utf-8") + "\n" for b in keep), what="results file")
    except OSError as e:
        raise OutputError(f"results file {p}: cannot repair it ({e.strerror}); copy the good lines aside") \
            from None
    return warnings
