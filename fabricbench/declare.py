"""What a config field declares about itself for the command line: its flag, kind of value, range, unit,
help and concept. Options are declared once, here, beside the field and its default.

    steps: int = field(default=8, metadata=declare("--steps", "count", "Steps at least, warm-up included.",
                                                   lo=1, hi=100_000))

fabricbench/cli/declared.py turns a declared field into its click option (type, default, help), and
tests/test_cli_declared.py fails when a command's option drifts from its field, or when two commands give
one concept two flags or two defaults. `concept` names the idea a field stands for where two configs
share it under different field names (train's `time_budget_s` is study's `repeat_budget_s`); `aliases`
are older flag names kept for one release, said in --help; `default_by` says who decides a None default
(the library, by device or machine), which the drift test reads as a default of its own.

A leaf module: it imports nothing of fabricbench, so a config at any layer can use it; the kinds are
words, and only cli/ maps them to click types.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

OPTION = "fabricbench.option"  # the key in a dataclass field's metadata

KINDS = ("count", "seconds", "fraction", "number", "size", "size list", "GPU list", "fabric", "fabric list",
         "strategy list", "op list", "text", "choice", "input file", "input file or folder", "output file",
         "output folder", "flag")


@dataclass(frozen=True, kw_only=True)
class Declared:
    flag: str  # "--steps"
    kind: str  # one of KINDS
    help: str
    unit: str = ""  # "s", "B", "steps", ...
    lo: float | None = None  # the documented range (the library may check more, e.g. against the machine)
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    zero_off: bool = False  # a fraction where 0 means "off"
    choices: tuple[str, ...] = ()
    concept: str | None = None  # None: the field's name
    aliases: tuple[str, ...] = ()  # deprecated flag names, accepted for one more release
    default_by: str | None = None  # a None default decided by the library: what it becomes

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"{self.flag}: unknown kind {self.kind!r}"
        assert self.flag.startswith("--"), self.flag


def declare(flag: str, kind: str, help: str, **kw: Any) -> dict[str, Declared]:
    """Metadata for a config field (merge it with other metadata: {**argv_field(...), **declare(...)})."""
    return {OPTION: Declared(flag=flag, kind=kind, help=help, **kw)}


def declared(config: Any) -> dict[str, tuple[Declared, Any]]:
    """field name -> (its declaration, its default) for each declared field of a config dataclass; a
    default_factory's value is built."""
    from dataclasses import MISSING

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
