"""The qualification spec: declarative TOML, no code in it, checked completely before anything runs.

    fabricbench qualify --spec node.toml --out q/
    fabricbench qualify --spec builtin:h200-sxm-8 --out q/

    [spec]
    name = "two gloo ranks"
    [run]                       # where the measuring checks run (defaults: native engine, all GPUs)
    engine = "torch"
    backend = "gloo"
    nprocs = 2
    [[check]]
    name = "allreduce_bw"
    kind = "collective"
    op = "all_reduce"
    sizes = ["1M", "16M"]
    min_busbw_gbps = 0.05

Levels (`qualify --level 1|2|3`): a check runs at the levels its `levels` key names (default: all), and
a [level.N] table may change the run settings at that level (iters, warmup, retries):

    [level.1]                   # quick: few iterations
    iters = 5
    [level.3]                   # long: more iterations, and a missed check is measured again
    iters = 100
    retries = 2

A mistake is a SpecError (a UsageError: one line, exit 2) naming the file, the line and key, and what is
expected: "node.toml:12: check 'allreduce_bw': min_busbw_gbps: expected a number > 0, got -3".
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fabricbench.declare import of
from fabricbench.errors import UsageError
from fabricbench.fabrics.model import shown
from fabricbench.measuring.config import SweepConfig
from fabricbench.files import read_input
from fabricbench.qualifying.checks import CHECKS
from fabricbench.qualifying.checks.base import GRADING, Check, Invalid
from fabricbench.qualifying.fields import LEVELS, Field, FieldError, READERS
from fabricbench.qualifying.units import RunSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib


class SpecError(UsageError):
    """A spec that cannot be used; the message names the file, line or key, and what is expected."""


RUN_FIELDS: dict[str, Field] = {
    "engine": Field("str", "native (compiled, NCCL; the default) or torch", default="native",
                    choices=("native", "torch")),
    "backend": Field("str", "torch engine: nccl or gloo", choices=("nccl", "gloo")),
    "nprocs": Field("int", "ranks, one process each (torch engine; gloo ranks need it)", at_least=1,
                    as_option=(of(SweepConfig, "nprocs"), "sweep")),
    "iters": Field("int", "timed iterations per size", default=20, at_least=1,
                   as_option=(of(SweepConfig, "iters"), "sweep")),
    "warmup": Field("int", "untimed iterations per size", default=5, at_least=0,
                    as_option=(of(SweepConfig, "warmup"), "sweep")),
    "timeout_s": Field("number", "seconds before a hung collective is aborted", default=300.0, positive=True,
                       as_option=(of(SweepConfig, "timeout_s"), "sweep")),
    "unit_timeout_s": Field("number", "seconds one measuring child may take, start to end", default=1800.0,
                            positive=True, as_option=(of(SweepConfig, "timeout_s"), "sweep")),
    "retries": Field("int", "re-measure a missed check up to this many times (a check's own retries wins)",
                     default=0, at_least=0, at_most=10),
    "baseline_tolerance": Field("number", "--baseline: a figure worse by more than this fraction is a regression "
                                "(the runs' own spread widens it; --tolerance overrides)", default=0.05,
                                at_least=0, at_most=0.9),
}
LEVEL_FIELDS: dict[str, Field] = {k: RUN_FIELDS[k] for k in ("iters", "warmup", "retries")}
DEFAULT_LEVEL = 2  # --level not given: the standard run
MAX_SPEC_BYTES = 4 << 20  # a spec is a page of TOML; 4 MiB is far beyond any real one
MAX_DEPTH = 8  # tables and lists inside one another; the deepest real key (expect = {...}) is 2
MAX_CHECKS = 1000
SPEC_FIELDS: dict[str, Field] = {
    "name": Field("str", "what this spec qualifies", required=True),
    "description": Field("str", "one paragraph for the report"),
    "source": Field("str", "where the thresholds come from"),
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, kw_only=True)
class Spec:
    name: str
    checks: list[Check]
    run: RunSettings = field(default_factory=RunSettings)
    description: str | None = None
    source: str | None = None
    path: str = "<spec>"  # the file (or builtin:NAME) it came from
    text: str = ""  # the TOML as read, kept beside the results
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)  # [level.N] run settings
    level: int | None = None  # the level this spec was narrowed to (at_level)

    def at_level(self, level: int) -> "Spec":
        """The checks that run at this level, under its run settings ([level.N] over [run])."""
        if level not in LEVELS:
            raise SpecError(f"--level {level}: choose 1 (quick, ~1 min), 2 (standard, ~5 min) or 3 "
                            f"(long, ~20 min)")
        checks = [c for c in self.checks if level in c.levels]
        if not checks:
            raise SpecError(f"{self.path}: no check runs at level {level} (their `levels` keys leave it out)")
        run = dataclasses.replace(self.run, **self.levels.get(level, {}))
        return dataclasses.replace(self, checks=checks, run=run, level=level)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def under(self, fabric: str) -> "Spec":
        """The same spec with every check that runs on the default fabric moved to `fabric` (qualify
        --fabric): e.g. the whole spec under an emulated slow link, shaped:200mbit."""
        try:
            name = READERS["fabric"][0](fabric)  # its name from here on: a custom fabric's values stay out
        except FieldError as e:
            raise SpecError(f"--fabric {shown(fabric)}: {e}") from None
        checks = [dataclasses.replace(c, params={**c.params, "fabric": name})
                  if c.params.get("fabric") == "default" else c for c in self.checks]
        return dataclasses.replace(self, checks=checks)


# -- loading ---------------------------------------------------------------------------------------

def builtin_names() -> list[str]:
    folder = resources.files("fabricbench.qualifying") / "specs"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def builtin_text(name: str) -> str:
    if name not in builtin_names():
        raise SpecError(f"builtin:{name}: no such built-in spec; choose from "
                        f"{', '.join('builtin:' + n for n in builtin_names())} (qualify --list-specs)")
    return (resources.files("fabricbench.qualifying") / "specs" / f"{name}.toml").read_text(encoding="utf-8")


def load_spec(where: str | os.PathLike) -> Spec:
    """A spec from a path or `builtin:NAME`."""
    where = str(where)
    if where.startswith("builtin:"):
        return parse_spec(builtin_text(where[len("builtin:"):]), where)
    if not os.path.lexists(where):
        raise SpecError(f"--spec {where}: no such file; give a TOML spec or builtin:NAME "
                        f"(qualify --list-specs)")
    try:
        text = read_input(where, what="--spec", max_bytes=MAX_SPEC_BYTES)
    except UsageError as e:
        raise SpecError(str(e)) from None
    if "\ufffd" in text or "\x00" in text:
        raise SpecError(f"--spec {where}: not a text file (it holds bytes that are not UTF-8, or NUL); "
                        f"give a TOML spec")
    return parse_spec(text, where)


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Read and check a whole spec; the first mistake raises SpecError."""
    try:
        doc = tomllib.loads(text)
    except RecursionError:  # tomllib recurses per nesting level: a hostile file exhausts the stack
        raise SpecError(f"{path}: nested more than {MAX_DEPTH} levels deep; a spec has tables of keys") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{path}:{m.group(1)}" if m else path
        what = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise SpecError(f"{where}: not valid TOML: {what}; see the spec format in `qualify --help`") from None
    loc = _Locator(text, path)
    unknown = sorted(set(doc) - {"spec", "run", "check", "level"})
    if unknown:
        raise SpecError(f"{loc.top(unknown[0])}: unknown table or key {unknown[0]!r}; a spec has [spec], "
                        f"[run], [level.N] and [[check]] tables")
    deep = _too_deep(doc, MAX_DEPTH)
    if deep:
        raise SpecError(f"{loc.top(deep)}: {deep!r} is nested more than {MAX_DEPTH} levels deep; no spec key "
                        f"needs that")
    head = doc.get("spec")
    if not isinstance(head, dict):
        raise SpecError(f"{path}: no [spec] table; start the file with [spec] and name = \"...\"")
    spec_vals = _read_table(head, SPEC_FIELDS, lambda k: loc.key("spec", None, k), "[spec]")
    run_raw = doc.get("run", {})
    if not isinstance(run_raw, dict):
        raise SpecError(f"{loc.top('run')}: run must be a table: write [run] on its own line")
    run_vals = _read_table(run_raw, RUN_FIELDS, lambda k: loc.key("run", None, k), "[run]")
    run = RunSettings(**{k: v for k, v in run_vals.items() if v is not None})
    _check_run(run, lambda k: loc.key("run", None, k))
    levels = _read_levels(doc.get("level", {}), loc)
    raw_checks = doc.get("check")
    if raw_checks is None:
        raise SpecError(f"{path}: no [[check]] tables; add at least one, e.g. [[check]] name = \"links\" "
                        f"kind = \"topology\" link = \"NV18\"")
    if not isinstance(raw_checks, list):
        raise SpecError(f"{loc.top('check')}: write each check as [[check]] (an array of tables), not [check]")
    if len(raw_checks) > MAX_CHECKS:
        raise SpecError(f"{path}: {len(raw_checks)} checks; at most {MAX_CHECKS}")
    checks: list[Check] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_checks):
        where_table = loc.check_line(i)
        label = f"{path}:{where_table}" if where_table else path
        if not isinstance(raw, dict):
            raise SpecError(f"{label}: check #{i + 1} is not a table; write each check as [[check]] with keys")
        if "kind" not in raw:
            raise SpecError(f"{label}: check #{i + 1} has no kind; add kind = one of {', '.join(CHECKS.names())}")
        if "name" not in raw:
            raise SpecError(f"{label}: check #{i + 1} ({raw.get('kind')!r}) has no name; add name = \"...\" "
                            f"(letters, digits, _ . -)")
        name = raw["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 128:
            raise SpecError(f"{loc.key('check', i, 'name')}: check name {ascii(name)[:80]} must be letters, "
                            f"digits, '_', '-' or '.', starting with a letter or digit, at most 128")
        if name in seen:
            raise SpecError(f"{loc.key('check', i, 'name')}: check name {name!r} is used twice (first at "
                            f"check #{seen[name] + 1}); names must be unique")
        seen[name] = i
        kind_name = raw["kind"]
        if not isinstance(kind_name, str) or kind_name not in CHECKS:
            raise SpecError(f"{loc.key('check', i, 'kind')}: check {name!r}: unknown kind {ascii(kind_name)[:60]}; "
                            f"choose from {', '.join(CHECKS.names())}")
        kind = CHECKS.get(kind_name)
        at = lambda k, i=i: loc.key("check", i, k)  # noqa: E731
        vals = _read_table(raw, kind.all_fields(), at, f"check {name!r} ({kind_name})")
        params = {k: v for k, v in vals.items() if k not in ("name", "kind", "description", *GRADING)}
        if kind.threshold_keys and not any(params.get(k) is not None for k in kind.threshold_keys):
            raise SpecError(f"{label}: check {name!r} ({kind_name}) sets no threshold; give at least one of "
                            f"{', '.join(kind.threshold_keys)}")
        try:
            kind.validate(params)
        except Invalid as e:
            raise SpecError(f"{at(e.key)}: check {name!r} ({kind_name}): {e}") from None
        checks.append(Check(name=name, kind=kind_name, params=params, description=vals.get("description"),
                            line=where_table, source=vals.get("source"), severity=vals.get("severity"),
                            warn_fraction=vals.get("warn_fraction"), retries=vals.get("retries"),
                            levels=vals.get("levels") or LEVELS))
    return Spec(name=spec_vals["name"], description=spec_vals.get("description"),
                source=spec_vals.get("source"), run=run, checks=checks, path=path, text=text, levels=levels)


def _too_deep(value: Any, limit: int, key: str = "") -> str | None:
    """The top-level key under which `value` nests deeper than `limit`, else None (iterative: no recursion)."""
    stack = [(v, 1, k) for k, v in value.items()] if isinstance(value, dict) else []
    while stack:
        v, depth, top = stack.pop()
        if depth > limit:
            return top
        if isinstance(v, dict):
            stack.extend((x, depth + 1, top) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1, top) for x in v)
    return None


def _read_levels(raw: Any, loc: "_Locator") -> dict[int, dict[str, Any]]:
    """[level.1], [level.2], [level.3]: the run settings each level changes."""
    if not isinstance(raw, dict):
        raise SpecError(f"{loc.top('level')}: write levels as tables, [level.1] iters = 5")
    out: dict[int, dict[str, Any]] = {}
    for k, table in raw.items():
        if k not in {str(n) for n in LEVELS}:
            raise SpecError(f"{loc.top('level')}: [level.{ascii(k)[1:-1][:20]}]: levels are 1, 2 and 3")
        if not isinstance(table, dict):
            raise SpecError(f"{loc.top('level')}: level.{k} must be a table: [level.{k}] iters = 5")
        vals = _read_table(table, LEVEL_FIELDS, lambda key, k=k: loc.key(f"level.{k}", None, key), f"[level.{k}]")
        out[int(k)] = {key: v for key, v in vals.items() if key in table}
    return out


def _read_table(raw: dict[str, Any], fields: dict[str, Field], at, what: str) -> dict[str, Any]:
    unknown = [k for k in raw if k not in fields]
    if unknown:
        k = unknown[0]
        raise SpecError(f"{at(k)}: {what}: unknown key {ascii(k)[:60]}; known keys: {', '.join(fields)}")
    out: dict[str, Any] = {}
    for key, f in fields.items():
        if key not in raw:
            if f.required:
                raise SpecError(f"{at(None)}: {what}: missing key {key!r} ({f.expects}: {f.doc})")
            out[key] = f.default
            continue
        try:
            out[key] = f.read(raw[key])
        except FieldError as e:
            raise SpecError(f"{at(key)}: {what}: {key}: {e}") from None
    return out


def _check_run(run: RunSettings, at) -> None:
    if run.backend is not None and run.engine != "torch":
        raise SpecError(f"{at('backend')}: [run]: backend = {run.backend!r} applies to engine = \"torch\" only")
    if run.cpu_ranks and run.nprocs is None:
        raise SpecError(f"{at('backend')}: [run]: gloo ranks need nprocs = N (how many CPU ranks), e.g. 2")


class _Locator:
    """Line numbers for keys: tomllib gives values, not positions, so the text is scanned once."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"-]+)\s*\]\]?")

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.tables: list[tuple[str, int, int]] = []  # (table name, occurrence, line of header), 1-based
        counts: dict[str, int] = {}
        for n, line in enumerate(self.lines, 1):
            m = self._HEADER.match(line)
            if m:
                name = m.group(2).strip('"')
                idx = counts.get(name, 0)
                counts[name] = idx + 1
                self.tables.append((name, idx, n))

    def check_line(self, i: int) -> int | None:
        return next((n for name, idx, n in self.tables if name == "check" and idx == i), None)

    def _span(self, table: str, i: int | None) -> tuple[int, int] | None:
        for pos, (name, idx, n) in enumerate(self.tables):
            if name == table and (i is None or idx == i):
                end = self.tables[pos + 1][2] if pos + 1 < len(self.tables) else len(self.lines) + 1
                return n, end
        return None

    def key(self, table: str, i: int | None, key: str | None) -> str:
        span = self._span(table, i)
        if span is None:
            return self.path
        start, end = span
        if key is not None:
            pat = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
            for n in range(start, end):
                if pat.match(self.lines[n - 1]):
                    return f"{self.path}:{n}"
        return f"{self.path}:{start}"

    def top(self, key: str) -> str:
        pat = re.compile(r"^\s*(\[\[?\s*)?\"?" + re.escape(key) + r"\"?\s*(=|\]\]?)")
        for n, line in enumerate(self.lines, 1):
            if pat.match(line):
                return f"{self.path}:{n}"
        return self.path
