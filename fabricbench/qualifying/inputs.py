"""The results files qualification reads: one node's (--from, --baseline, --resume) through the shared
reader (results/records.py), and a fleet's gathered file (--fleet), streamed and checked here.

    fabricbench qualify --fleet all-hosts.jsonl          (12,500 hosts: one pass, one line at a time)
    fabricbench qualify --init node.toml --from q/results.jsonl

Files come from many machines and half-written runs. A line that is not JSON, not an object, or a record
whose fields have the wrong types is skipped and counted (the caller may say how many); a record of
another fabricbench schema version is an error, since its fields may mean something else. Nothing here
raises anything but UsageError, so a damaged file gives one line and exit 2, never a traceback.

Why the fleet has a reader of its own: 150,000 records of 1.6 kB, one line at a time (never the whole
file in memory), parsed by orjson and checked by a flat type check of the fields a figure reads (4 µs a
record); the shared reader's full check costs 28 µs a record, 4 s of the 20 s a 12,500-host fleet may take.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

try:  # a declared dependency; a GPU machine without network may lack it: json then, slower
    import orjson

    _loads, _DecodeError = orjson.loads, orjson.JSONDecodeError
except ImportError:
    orjson = None
    _loads, _DecodeError = json.loads, ValueError

from fabricbench.errors import UsageError
from fabricbench.files import check_input, json_safe
from fabricbench.results import records as results_records
from fabricbench.results.fields import flat_types
from fabricbench.results.schema import SCHEMA

_NUM = (int, float)
# kind -> the fields a figure reads, checked when present (None is always allowed: "not measured"); their
# types are the shared reader's (results/fields.FIELDS), so the two readers never disagree on a type
_READ = {
    "collective": ("op", "dtype", "requested_bytes", "time_us", "busbw_gbps", "algbw_gbps", "cv", "nranks", "gpus",
                   "status", "wrong", "transport", "engine", "backend", "iters", "extra"),
    "copy": ("gbps", "direction", "bytes", "copy_kind", "src", "dst", "extra"),
    "train": ("throughput", "status", "strategy", "model", "nranks", "device", "first_loss", "last_loss"),
    "topology": ("gpus",),
}
_TYPES = {kind: {k: flat_types(kind, k) for k in keys} for kind, keys in _READ.items()}
_COMMON = {k: flat_types(None, k) for k in ("kind", "host", "fabric", "run_id", "schema")}


@dataclass
class Tally:
    """What a read skipped, for a warning line."""

    lines: int = 0
    skipped: int = 0

    def note(self, what: str) -> str | None:
        if not self.skipped:
            return None
        return f"{what}: skipped {self.skipped} of {self.lines} lines (not JSON, not a record, or wrong types)"


_CHECKS = {kind: tuple({**_COMMON, **table}.items()) for kind, table in _TYPES.items()}
_COMMON_ITEMS = tuple(_COMMON.items())


def well_typed(rec: Any) -> bool:
    """A dict whose known fields have the types readers rely on (bool is not a number here). Called once
    per line of a 12,500-host file: a flat loop, no helper calls."""
    if type(rec) is not dict:
        return False
    kind = rec.get("kind")
    for key, types in _CHECKS.get(kind, _COMMON_ITEMS) if type(kind) is str else _COMMON_ITEMS:
        v = rec.get(key)
        if v is not None and (v.__class__ is bool or not isinstance(v, types)):
            return False
    if kind == "collective":
        b = rec.get("requested_bytes")
        if b is not None and b < 0:
            return False
        gpus = rec.get("gpus")
        if gpus:
            for g in gpus:
                if g.__class__ is not int:
                    return False
    elif kind == "train" and rec.get("throughput") is not None:
        sps = rec["throughput"].get("samples_per_s")
        if sps is not None and (sps.__class__ is bool or not isinstance(sps, _NUM)):
            return False
    return True


def records(path: str | os.PathLike, *, what: str, tally: Tally | None = None) -> Iterator[dict[str, Any]]:
    """Every well-typed record of a JSON-lines results file, one line at a time (never the whole file)."""
    p = check_input(path, what=what)
    t = tally if tally is not None else Tally()
    try:
        fh = open(p, "rb")
    except OSError as e:
        raise UsageError(f"{what} {p}: cannot read it ({e.strerror})") from None
    with fh:
        for line in fh:
            t.lines += 1
            line = line.strip()
            if not line:
                continue
            try:
                rec = _loads(line)
            except (_DecodeError, RecursionError):
                rec = _lenient(line)  # older writers put NaN in a line: read it, NaN as null
                if rec is None:
                    t.skipped += 1
                    continue
            if not well_typed(rec):
                t.skipped += 1
                continue
            schema = rec.get("schema")
            if schema is not None and schema.startswith("fabricbench/") and schema != SCHEMA:
                raise UsageError(f"{what} {p}: line {t.lines} is schema {schema[:40]!r}; this fabricbench reads "
                                 f"{SCHEMA}: read it with the fabricbench that wrote it")
            yield rec


def _lenient(line: bytes) -> Any:
    try:
        return json_safe(json.loads(line))
    except (ValueError, RecursionError):
        return None


def results_path(path: str | os.PathLike, *, what: str) -> Path:
    """A results file, or the results.jsonl inside a qualify --out folder."""
    p = Path(path)
    if p.is_dir():
        inner = p / "results.jsonl"
        if not inner.exists():
            raise UsageError(f"{what} {path}: a folder without results.jsonl; give a results file or a "
                             f"qualify --out folder")
        return inner
    return p


def read_all(path: str | os.PathLike, *, what: str) -> tuple[list[dict[str, Any]], str | None]:
    """All records of one node's results file (--from, --baseline) through the tolerant reader every
    command shares (results/records.py), and a note of what it skipped."""
    got = results_records.read_nonempty(results_path(path, what=what), what=what)
    note = None
    if got.warnings:
        note = f"{what} {path}: skipped {len(got.warnings)} of {got.lines} lines ({got.warnings[0]}" + (
            ", ..." if len(got.warnings) > 1 else "") + ")"
    return list(got.records), note


def read_json(path: str | os.PathLike, *, what: str) -> Any:
    """A small JSON document (verdicts.json), or None when it is damaged (the caller goes without it)."""
    p = check_input(path, what=what, max_bytes=256 << 20)
    try:
        return _loads(p.read_bytes())
    except (_DecodeError, RecursionError, OSError):
        return None
