"""What a check kind is: its keys (Fields), a cross-key validation, and a judge that turns measurements
into Items. The judge asks the context (units.Measurements) for measurements; it runs each one once (and records it).

    fabricbench qualify --spec my.toml --out q/

Adding a kind is one module in this package filling a CheckKind, plus one row in checks/__init__.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.units import Measurements
from fabricbench.qualifying.verdict import Item
from fabricbench.results.status import Severity


class Invalid(ValueError):
    """A check's keys do not fit together; `key` is the one to point at."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# Keys every check may have, whatever its kind.
COMMON: dict[str, Field] = {
    "name": Field("str", "unique name; --only/--skip and JUnit use it", required=True),
    "kind": Field("str", "the check kind (qualify --list-kinds)", required=True),
    "description": Field("str", "what the check is for, shown in the report"),
    "source": Field("str", "where the threshold comes from (a vendor figure, a public health-check floor)"),
    "severity": Field("severity", "the severity of a miss: critical (default for floors), warning "
                                  "(default for cv and latency) or info"),
    "warn_fraction": Field("number", "a floor missed by less than this fraction is a warning, e.g. 0.95 "
                                     "(a ceiling: exceeded by less than 1/fraction)", fraction=True),
    "retries": Field("int", "re-measure a missed check up to this many times (default: [run] retries); "
                            "a pass after a miss is a warning (flaky)", at_least=0, at_most=10),
    "levels": Field("levels", "the --level values that run this check (default: every level)"),
}
# COMMON keys that grade and schedule a check, kept out of its params (what its judge reads)
GRADING = ("source", "severity", "warn_fraction", "retries", "levels")


@dataclass(frozen=True, kw_only=True)
class Check:
    """One [[check]] table, its values read and checked."""

    name: str
    kind: str
    params: dict[str, Any]  # key -> value as its Field read it (defaults filled in)
    description: str | None = None
    line: int | None = None  # where its table starts in the spec file
    source: str | None = None
    severity: Severity | None = None  # of a miss; None: the criterion's default (verdict.WARNING_CRITERIA)
    warn_fraction: float | None = None
    retries: int | None = None  # None: the spec's [run] retries
    levels: tuple[int, ...] = (1, 2, 3)

    def get(self, key: str, default: Any = None) -> Any:
        v = self.params.get(key)
        return default if v is None else v


@dataclass(frozen=True, kw_only=True)
class CheckKind:
    name: str
    description: str  # one line, for --list-kinds
    fields: dict[str, Field]
    judge: Callable[["Check", Measurements], list[Item]]
    validate: Callable[[dict[str, Any]], None] = lambda params: None  # raises Invalid
    # "node": runs per node (also under torchrun it is skipped there); "collective": may run across
    # the ranks of a torchrun/srun launch
    scope: str = "node"
    threshold_keys: tuple[str, ...] = field(default=())  # a check with none of these set judges nothing
    # False for a kind that reads facts (the topology) rather than timing anything: a retry would read
    # the same facts, so its miss is final and never retried (nor called flaky)
    measures: bool = True

    def all_fields(self) -> dict[str, Field]:
        return {**COMMON, **self.fields}


def retries_of(check: Check, kind: CheckKind, run: Any) -> int:
    """How many times a miss of `check` is measured again: its own retries, else the run's (spec [run]
    or level); none for a kind that measures nothing."""
    if not kind.measures:
        return 0
    return check.retries if check.retries is not None else run.retries
