"""What a config field declares about itself for the command line: its flag, kind of value, range, unit,
help and concept. Options are declared once, here, beside the field and its default.

    steps: int = field(default=8, metadata=declare("--steps", "count", "Steps at least, warm-up included.",
                                                   lo=1, hi=100_000))

fabricbench/cli/declared.py turns a declared field into its click option (type, default, help), and
tests/cli/test_cli_declared.py fails when a command's option drifts from its field, or when two commands give
one concept two flags or two defaults. `concept` names the idea a field stands for where two configs
share it under different field names (train's `time_budget_s` is study's `repeat_budget_s`); `aliases`
are older flag names kept for one release, said in --help; `default_by` says who decides a None default
(the library, by device or machine), which the drift test reads as a default of its own.

One declaration per option: a field that a second config shares takes the first one's Declared
(`shared(D, help=...)`: only the words may differ, never the kind, range or unit), and `check(config)`
(each config's __post_init__) refuses a value outside the declared range, so `fabricbench.study(...)`
and `fabricbench study` refuse the same values in the same words. `bounds()` is the range, with each
kind's default ends, that cli/declared.py gives the click type.

A leaf module: it imports only errors (another leaf), so a config at any layer can use it; the kinds are
words, and only cli/ maps them to click types.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any

from fabricbench.errors import UsageError

OPTION = "fabricbench.option"  # the key in a dataclass field's metadata

KINDS = ("count", "count list", "seconds", "fraction", "number", "size", "size list", "GPU list", "GPU count",
         "fabric", "fabric list",
         "strategy list", "op list", "check list", "text", "choice", "input file", "input file or folder",
         "output file", "output folder", "flag", "flag choice")
WEEK_S = 7 * 86400.0  # the longest duration any option takes
NUMERIC = ("count", "seconds", "fraction", "number")
# each numeric kind's range where a declaration leaves an end out
DEFAULT_BOUNDS = {"count": (1, 10_000_000), "count list": (1, 1024), "seconds": (1.0, WEEK_S), "fraction": (0.0, 1.0),
                  "number": (0.0, WEEK_S)}
WORDS = ("help", "default_by", "concept", "aliases")  # what a second config may say its own way (shared())


@dataclass(frozen=True, kw_only=True)
class Declared:
    flag: str  # "--steps"
    kind: str  # one of KINDS
    help: str
    unit: str = ""  # "s", "B", "steps", ...
    lo: float | None = None  # the documented range (the library may check more, e.g. against the machine)
    hi: float | None = None  # a text's: its most characters
    lo_open: bool = False
    hi_open: bool = False
    zero_off: bool = False  # a fraction where 0 means "off"
    choices: tuple[str, ...] = ()
    concept: str | None = None  # None: the field's name
    aliases: tuple[str, ...] = ()  # deprecated flag names, accepted for one more release
    default_by: str | None = None  # a None default decided by the library: what it becomes
    # "flag choice": one flag per choice (--<choice>), each with its help, in --help's order; `flag` is the
    # default's
    each: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"{self.flag}: unknown kind {self.kind!r}"
        assert self.flag.startswith("--"), self.flag
        if self.kind == "flag choice":
            assert len(self.each) == len(self.choices) and self.flag[2:] in self.choices, self.flag

    def bounds(self) -> tuple[float, float]:
        """(lo, hi) of a numeric kind, each kind's default end where the declaration gives none."""
        lo, hi = DEFAULT_BOUNDS[self.kind]
        return (lo if self.lo is None else self.lo), (hi if self.hi is None else self.hi)

    def range_text(self) -> str:
        lo, hi = self.bounds()
        if self.kind == "count":
            return f"{int(lo):,} to {int(hi):,}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"{left}{lo:g}, {hi:g}{right}{' ' + self.unit if self.unit else ''}" + \
            (", or 0 (off)" if self.zero_off else "")

    def refusal(self, value: Any) -> str | None:
        """Why `value` is outside this option's declared range, or None where it is inside (None, a
        default decided elsewhere, is always inside; so is any value of a kind without a range)."""
        if value is None:
            return None
        if self.kind in ("choice", "flag choice"):
            return None if value in self.choices else \
                f"choose {', '.join(self.choices[:-1])} or {self.choices[-1]}".replace("choose  or ", "choose ")
        if self.kind not in NUMERIC:
            return None
        whole = self.kind == "count"
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            return f"a {'whole number' if whole else 'number'}, {self.range_text()}"
        if not math.isfinite(value):
            return f"a finite number, {self.range_text()}"
        if self.zero_off and value == 0:
            return None
        lo, hi = self.bounds()
        if value < lo or value > hi or (self.lo_open and value == lo) or (self.hi_open and value == hi):
            return f"outside {self.range_text()}"
        return None


def declare(flag: str, kind: str, help: str, **kw: Any) -> dict[str, Declared]:
    """Metadata for a config field (merge it with other metadata: {**argv_field(...), **declare(...)})."""
    return {OPTION: Declared(flag=flag, kind=kind, help=help, **kw)}


def shared(d: Declared, **words: Any) -> dict[str, Declared]:
    """The metadata of a field that a second config shares with `d`'s: the same flag, kind, range and
    unit; only its words (help, default_by) may say what the option does in this command."""
    assert set(words) <= set(WORDS), f"{d.flag}: only {', '.join(WORDS)} may differ, not {sorted(words)}"
    return {OPTION: replace(d, **words)}


def of(config: Any, name: str) -> Declared:
    """The declaration of `config`'s field `name` (for shared(): a second config's field)."""
    return next(f.metadata[OPTION] for f in fields(config) if f.name == name)


def check(config: Any) -> None:
    """Refuse a declared field of `config` whose value is outside its declared range: the one range
    check of every config (called from each __post_init__), for the CLI and the library alike."""
    for f in fields(config):
        d = f.metadata.get(OPTION)
        if d is None:
            continue
        value = getattr(config, f.name)
        why = d.refusal(value)
        if why is not None:  # a flag choice's value is no flag's argument: said as the field it is
            said = f"{f.name}={value!r}" if d.kind == "flag choice" else f"{d.flag} {value}"
            raise UsageError(f"{said}: {why} ({type(config).__name__}.{f.name})")


def declared(config: Any) -> dict[str, tuple[Declared, Any]]:
    """field name -> (its declaration, its default) for each declared field of a config dataclass; a
    default_factory's value is built."""
    out = {}
    for f in fields(config):
        d = f.metadata.get(OPTION)
        if d is None:
            continue
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)  # type: ignore[misc]
        out[f.name] = (d, default)
    return out


def concept(name: str, d: Declared) -> str:
    return d.concept or name
