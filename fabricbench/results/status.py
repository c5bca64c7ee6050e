"""The one status vocabulary of every record kind: collective, copy, train, study unit, qualify verdict.

    fabricbench relate r.jsonl      (a train record's status decides whether its step time is used)

Status is a str enum, so `Status.OK == "ok"` and records keep writing plain strings. Each kind uses a
subset (KIND_STATUSES); a record whose status is outside its kind's subset is damaged input.
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
    INTERRUPTED = "interrupted"  # a study unit stopped by Ctrl-C or SIGTERM
    SKIPPED = "skipped"  # a study unit done by an earlier attempt (--resume)
    RUNNING = "running"  # a unit started and not yet ended (what a crash leaves)

    def __str__(self) -> str:
        return self.value


# Which statuses each record kind may carry (what its writer can write).
KIND_STATUSES: dict[str, frozenset[Status]] = {
    "collective": frozenset({Status.OK, Status.WRONG, Status.TIMEOUT, Status.WAIVED, Status.ERROR}),
    "copy": frozenset({Status.OK, Status.WAIVED, Status.ERROR}),
    "train": frozenset({Status.OK, Status.FLAGGED, Status.OOM, Status.ERROR, Status.WAIVED, Status.TIMEOUT}),
    "study_unit": frozenset({Status.OK, Status.OOM, Status.FLAGGED, Status.WAIVED, Status.ERROR, Status.TIMEOUT,
                             Status.INTERRUPTED, Status.SKIPPED, Status.RUNNING}),
    "verdict": frozenset({Status.PASS, Status.FAIL, Status.WAIVED, Status.ERROR}),
}

# A measurement that can be reused (by --resume) or read as a figure.
REUSABLE = frozenset({Status.OK, Status.WAIVED})
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
