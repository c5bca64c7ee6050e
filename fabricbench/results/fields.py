"""Record kinds and the types of their fields: what the shared reader (results/records.py) checks.

    fabricbench relate sweeps.jsonl      (each line checked against its kind's fields before relate reads it)

A kind is registered by the package that writes it (`register_kind`): results/ declares the measurement
kinds every engine and importer shares (collective, copy, train) below; studying/kinds.py, qualifying/kinds.py,
relating/kinds.py and topology/kinds.py declare theirs, and their packages register them when imported (every
reader of such a kind imports its package). results/ names none of them. A kind not registered in a process
is read unchecked, as any other unknown kind.

A spec is a type (str, int, float = any number, bool, dict, list), a Num (a number with the range physics
allows: COUNT, FRACTION, TIME...), a tuple of specs (any of them), a dict (an object whose listed keys,
where present and not null, match), or a one-element list (a list whose items match; null items only where
they are numbers). Keys ending in "!" must be present and not null. A kind may also give a `check`: what
the fields allow together (a collective's bytes are whole elements for its dtype and rank count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fabricbench import dtypes
from fabricbench.collectives import COLLECTIVES
from fabricbench.results.status import KIND_STATUSES, Status


@dataclass(frozen=True)
class Num:
    """A number inside the range physics allows (bounds inclusive unless `above`)."""

    what: str  # "a count", "a fraction": for the warning ("calls_per_step is -3, not a count (>= 0)")
    lo: float | None = None
    hi: float | None = None
    above: bool = False  # lo itself is outside (a time is > 0)
    whole: bool = False

    def __str__(self) -> str:
        lo = "" if self.lo is None else (f"> {self.lo:g}" if self.above else f">= {self.lo:g}")
        hi = "" if self.hi is None else f"<= {self.hi:g}"
        return f"{self.what} ({' and '.join(x for x in (lo, hi) if x)})"

    def problem(self, v: float) -> str | None:
        if (self.lo is not None and (v < self.lo or (self.above and v == self.lo))) or \
                (self.hi is not None and v > self.hi):
            return f"{v!r}, not {self}"
        return None


NUM = float  # any number (a loss, a margin: either sign)
COUNT = Num("a count", lo=0, whole=True)  # calls, iterations, elements, steps, wrong elements
AMOUNT = Num("an amount", lo=0)  # a non-negative figure: bandwidth, throughput, cv, a count per step
SIZE = Num("a size in bytes", lo=0, whole=True)
RANKS = Num("a rank count", lo=1, whole=True)
INDEX = Num("an index", lo=0, whole=True)  # a GPU ordinal
FRACTION = Num("a fraction", lo=0, hi=1)
TIME = Num("a time", lo=0, above=True)  # a measured time: a step, an iteration
DURATION = Num("a duration", lo=0)  # how long a unit or check took (a skipped one: 0)
RATE = Num("a rate", lo=0, above=True)

HEADER: dict[str, Any] = {"schema!": str, "kind!": str, "run_id": str, "timestamp": str, "fabric": str,
                          "host": str, "env": dict}


@dataclass(frozen=True)
class Kind:
    fields: dict[str, Any]
    check: Callable[[dict[str, Any]], str | None] | None = None


KINDS: dict[str, Kind] = {}
FIELDS: dict[str, dict[str, Any]] = {}  # kind -> its field specs (the registered kinds')


def register_kind(kind: str, fields: dict[str, Any], *, statuses: frozenset[Status] | None = None,
                  check: Callable[[dict[str, Any]], str | None] | None = None) -> None:
    """Declare a record kind's fields (and, where its statuses are not
    already in results/status.KIND_STATUSES, which ones it may carry). Called once
    per kind, by the package that writes it; a second, different declaration is a programming error."""
    new = Kind(fields=fields, check=check)
    assert KINDS.get(kind, new) == new, f"record kind {kind!r} registered twice, differently"
    KINDS[kind] = new
    FIELDS[kind] = fields
    if statuses is not None:
        assert KIND_STATUSES.get(kind, statuses) == statuses, f"statuses of {kind!r} registered twice"
        KIND_STATUSES[kind] = statuses


def register_header_field(name: str, spec: Any) -> None:
    """A header field a package writes onto every record it makes (the study's tag)."""
    assert HEADER.get(name, spec) == spec, f"header field {name!r} registered twice, differently"
    HEADER[name] = spec


def flat_types(kind: str | None, key: str) -> tuple[type, ...]:
    """The Python types a top-level field of a kind may have (bool is never a number), from FIELDS and the
    header: for a reader that checks a few fields one level deep (qualify --fleet's streamed lines)."""
    spec = next((s for k, s in (*FIELDS.get(kind or "", {}).items(), *HEADER.items())
                 if k.rstrip("!") == key), None)
    assert spec is not None, f"{kind}.{key} is not in results/fields.FIELDS"

    def types(s: Any) -> tuple[type, ...]:
        if isinstance(s, tuple):
            return tuple(t for x in s for t in types(x))
        if isinstance(s, dict):
            return (dict,)
        if isinstance(s, list):
            return (list,)
        if isinstance(s, Num):
            return (int,) if s.whole else (int, float)
        return (int, float) if s is float else (s,)
    return types(spec)


def _type_ok(v: Any, spec: Any) -> bool:
    if isinstance(spec, Num):
        return _type_ok(v, int if spec.whole else float)
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


def _value_problem(v: Any, spec: Any, where: str) -> str | None:
    if not _type_ok(v, spec):
        return f"{where} is {value_name(v)}, not {_want(spec)}"
    if isinstance(spec, Num):
        why = spec.problem(v)
        return f"{where} is {why}" if why else None
    return None


def field_problem(value: Any, spec: Any, where: str = "") -> str | None:
    """The first field of `value` that does not match `spec` ("step_time.median_s is a string, not a
    number"; "comm.collectives[0].calls_per_step is -3, not an amount (>= 0)"), or None when it matches."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where or 'record'} is {value_name(value)}, not an object"
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
            else:
                why = _value_problem(v, sub, here)
            if why:
                return why
        return None
    if isinstance(spec, list):
        for i, item in enumerate(value):
            if item is None:
                if isinstance(spec[0], dict):  # a null is a non-finite number read back, never an object
                    return f"{where}[{i}] is null, not an object"
                continue
            why = (field_problem(item, spec[0], f"{where}[{i}]") if isinstance(spec[0], dict)
                   and _type_ok(item, spec[0]) else _value_problem(item, spec[0], f"{where}[{i}]"))
            if why:
                return why
        return None
    return _value_problem(value, spec, where)


def value_name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a whole number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _want(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_want(s) for s in spec)
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, dict):
        return "an object"
    if isinstance(spec, Num):
        return "a whole number" if spec.whole else "a number"
    return {str: "a string", int: "a whole number", float: "a number", bool: "true/false", dict: "an object",
            list: "a list"}[spec]


# --- the measurement kinds every engine and importer writes -------------------------------------------
# the fabric's facts a study writes onto its records (studying/runner._facts); a train run writes the first two
_FACTS = {"fabric_env": dict, "shaped_rate_bps": RATE, "netns": str}

# --- the host's load from other processes while the run measured (fabricbench/hostload.py) ----------------
# one field on train and collective records; `busy` past the threshold the record states
_HOST_LOAD = {"host_load": {"window_s!": DURATION, "cpus!": RANKS, "others_cpu_s": AMOUNT, "ours_cpu_s": AMOUNT,
                            "others_cpus!": AMOUNT, "threshold_cpus!": AMOUNT, "busy!": bool, "readings": COUNT,
                            "top": [{"pid": COUNT, "name": str, "cpus": AMOUNT}], "steal_cpus": AMOUNT}}


def _collective_sizes(rec: dict[str, Any]) -> str | None:
    """A collective's bytes are whole elements of its dtype, split into whole per-rank parts where the
    collective splits its buffer (collectives/base.Collective.size), and count is bytes / element size."""
    op, dtype, nbytes, n = rec.get("op"), rec.get("dtype"), rec.get("bytes"), rec.get("nranks")
    if op not in COLLECTIVES.names() or not isinstance(dtype, str) or nbytes is None:
        return None
    try:
        elem = dtypes.elem_size(dtype)
    except ValueError:  # UsageError: a dtype this fabricbench does not know is not judged
        return None
    coll = COLLECTIVES.get(op)
    if coll.split and n:
        if nbytes % (elem * n):
            return (f"bytes is {nbytes}, not whole {dtype} elements on each of {n} ranks "
                    f"(a multiple of {elem * n})")
    elif nbytes % elem:
        return f"bytes is {nbytes}, not whole {dtype} elements (a multiple of {elem})"
    count = rec.get("count")
    if count is not None and count * elem != nbytes:
        return f"count is {count}, but bytes {nbytes} hold {nbytes // elem} {dtype} elements"
    requested = rec.get("requested_bytes")
    if requested is not None and nbytes > requested:
        return f"bytes is {nbytes}, more than the {requested} requested (sizes round down)"
    return None


_STEP = {"median_s": TIME, "mean_s": TIME, "p95_s": TIME, "cv": AMOUNT, "ci95_rel": AMOUNT}

register_kind("collective", {
    "op!": str, "dtype": str, "bytes!": SIZE, "requested_bytes": SIZE, "count": COUNT, "nranks!": RANKS,
    "gpus": [INDEX], "inplace": bool, "graph": bool, "iters": COUNT, "time_us": TIME, "mean_us": TIME,
    "min_us": TIME, "max_us": TIME, "p95_us": TIME, "cv": AMOUNT, "ci95_rel": AMOUNT, "algbw_gbps": AMOUNT,
    "busbw_gbps": AMOUNT, "busbw_factor": AMOUNT, "wrong": COUNT, "status!": str, "message": str, "engine": str,
    "backend": str, "transport": str, "gpu_names": [str], "transport_mismatch": str, **_FACTS, **_HOST_LOAD,
    "extra": {"settings": dict, "topology_gpus": [INDEX], "placement_gpus": [INDEX], "hosts": [str]},
}, check=_collective_sizes)
register_kind("copy", {
    "bytes!": SIZE, "time_us": TIME, "min_us": TIME, "max_us": TIME, "gbps": AMOUNT, "copy_kind": str,
    "direction": str, "src": str, "dst": str, "gpus": [INDEX], "iters": COUNT, "peer_access": bool, "extra": dict,
})
register_kind("train", {
    "strategy!": str, "model": str, "status!": str, "message": str, "nranks": RANKS, "world_size": RANKS,
    "batch_size": COUNT, "global_batch": COUNT, "seq_len": COUNT, "image_size": COUNT, "device": str,
    "gpus": [INDEX], "precision": str, "mixed_precision": str, "steps": COUNT, "params": COUNT,
    "step_time": _STEP,
    "throughput": {"samples_per_s": AMOUNT, "tokens_per_s": AMOUNT, "mfu": AMOUNT},
    "memory": {"max_reserved_bytes": SIZE, "max_allocated_bytes": SIZE},
    "comm": {"world_size": RANKS, "collectives": [{"bytes!": AMOUNT, "calls_per_step": AMOUNT, "group_size": RANKS,
                                                     "dtype": str, "op!": str}],
             "timeline": {"exposed_fraction": FRACTION, "step_s": TIME}},
    "losses": [NUM], "step_times_s": [TIME], **_FACTS, "first_loss": NUM, "last_loss": NUM,
    "gpu_busy_fraction": FRACTION, **_HOST_LOAD,
    # seconds per start-up phase, the steps and the teardown (training/phases.py PHASES, and their total)
    "phases": {p: DURATION for p in ("prepare", "launch", "imports", "init", "build", "wrap", "first_step",
                                     "warmup", "timed", "trace", "teardown", "join", "total")},
})
# imported health (results/health.py on main: NCCL RAS per communicator, DCGM diag per test and entity)
register_kind("health", {
    "check!": str, "healthy!": bool, "comm_hash": str, "nranks": RANKS, "ranks_reporting": COUNT,
    "findings": [{"kind!": str, "detail": str, "ranks": [dict], "counts": dict}], "extra": dict,
})
register_kind("diag", {
    "test!": str, "result!": str, "category": str, "entity_group": str, "entity_id": INDEX,
    "errors": [{"error_id": int, "category": int, "severity": int, "message": str}], "info": [str],
    "figures": [{"name!": str, "value!": NUM, "unit": str}], "extra": dict,
})
