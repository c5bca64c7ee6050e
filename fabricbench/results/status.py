"""The one status vocabulary of every record kind: collective, copy, train, study unit, qualify unit and
verdict; and, beside it, the one severity scale of qualify.

    fabricbench relate r.jsonl      (a train record's status decides whether its step time is used)
    fabricbench qualify --spec builtin:h200-sxm-8 --out q/      (each verdict: a status and a severity)

Status is a str enum, so `Status.OK == "ok"` and records keep writing plain strings. Each kind uses a
subset (KIND_STATUSES); a record whose status is outside its kind's subset is damaged input. Every writer
and reader names a status through this module (tests/test_status_vocabulary.py holds them to it).

Severity is another axis: a status says what happened to one check (it passed, missed, could not run),
a severity how much that matters to the operator and the exit status (a miss may be critical or only a
warning; a pass after a miss is a warning). It is a str enum too, ordered from best to worst.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OK = "ok"  # measured (collective, copy, train, study unit)
    PASS = "pass"  # a qualify verdict met its threshold
    FAIL = "fail"  # a qualify verdict missed its threshold
    WRONG = "wrong"  # a collective with --check found wrong elements
    FLAGGED = "flagged"  # a train run timed, but its loss did not fall
    OOM = "oom"  # a train run or unit out of GPU memory
    TIMEOUT = "timeout"  # a collective or unit ran past its time limit
    WAIVED = "waived"  # cannot run here (too few GPUs, no root for a shaped fabric...): not a failure
    ERROR = "error"  # it failed; the record's message says why
    INTERRUPTED = "interrupted"  # a study unit or train run stopped by Ctrl-C, SIGTERM or SIGHUP
    SKIPPED = "skipped"  # a study unit done by an earlier attempt (--resume)
    RUNNING = "running"  # a unit started and not yet ended (what a crash leaves)

    def __str__(self) -> str:
        return self.value


# Which statuses each record kind may carry (what its writer can write): the measurement kinds here, the
# others registered by their packages (results/fields.register_kind: study units, qualify units, verdicts).
KIND_STATUSES: dict[str, frozenset[Status]] = {
    "collective": frozenset({Status.OK, Status.WRONG, Status.TIMEOUT, Status.WAIVED, Status.ERROR}),
    "copy": frozenset({Status.OK, Status.WAIVED, Status.ERROR}),
    "train": frozenset({Status.OK, Status.FLAGGED, Status.OOM, Status.ERROR, Status.WAIVED, Status.TIMEOUT,
                        Status.INTERRUPTED}),
}

# What --resume keeps rather than runs again (sweep, compare, scaling, qualify units): measured, or waived
# here. (A study keeps its units' measured outcomes, oom and flagged too: studying/units.DONE.)
REUSABLE = frozenset({Status.OK, Status.WAIVED})
# Collectives whose time was measured: "wrong" (elements differ from the exact result) was timed all the same.
TIMED_COLLECTIVE = frozenset({Status.OK, Status.WRONG})
# Train runs whose step was timed: "flagged" (the loss did not fall) is timed all the same.
TIMED_TRAIN = frozenset({Status.OK, Status.FLAGGED})
# Verdicts that let qualify exit 0.
VERDICT_OK = frozenset({Status.PASS, Status.WAIVED})


def parse(value: object, kind: str | None = None) -> Status | None:
    """The Status a record field names, or None when it names none (or none its kind may carry)."""
    try:
        s = Status(value)
    except ValueError:
        return None
    allowed = KIND_STATUSES.get(kind or "")
    if allowed is not None and s not in allowed:
        return None
    return s


class Severity(str, Enum):
    """How bad a qualify verdict is (NVIDIA health validation's scale), from best to worst."""

    PASS = "pass"  # met
    INFO = "info"  # waived, or a miss a spec made informational
    WARNING = "warning"  # a near miss, a miss of a warning criterion (cv, latency), or flaky
    UNKNOWN = "unknown"  # could not be measured
    CRITICAL = "critical"  # a floor missed

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """Its place from best (0) to worst: compare severities by rank, never by name."""
        return _SEVERITY_ORDER.index(self)


_SEVERITY_ORDER = tuple(Severity)
# What a spec may make a miss (`severity = "warning"` in a check).
MISS_SEVERITIES = (Severity.CRITICAL, Severity.WARNING, Severity.INFO)


def worst(severities, default: Severity = Severity.PASS) -> Severity:
    """The worst of some severities (plain strings or Severity), `default` when there are none."""
    return max((Severity(s) for s in severities), key=_SEVERITY_ORDER.index, default=default)


def parse_severity(value: object) -> Severity | None:
    """The Severity a field names, or None when it names none."""
    try:
        return Severity(value)
    except ValueError:
        return None
