"""Verdicts: what a check concluded, with the number measured, the threshold and the headroom between them.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/      (q/verdicts.json holds these)

status: "pass", "fail", "waived" (cannot apply here; `reason` says why, e.g. a pair check on one GPU) or
"error" (could not be measured; `reason` says what went wrong).

severity: how bad it is, for the operator and the exit status (NVIDIA health validation's scale):
pass; info (waived); warning (a miss in the `warn_fraction` band just below a floor, a miss of a warning
criterion such as cv or latency, or a pass after a miss: flaky); unknown (could not be measured);
critical (a floor missed). A spec sets the severity of a miss per check (`severity = "warning"`).
Exit status: 0 pass/info, 1 critical, 3 unknown, 4 warning (the worst verdict decides; 2 is bad input),
5 nothing measured: every check waived (none could apply here), which is not a pass (`outcome`).
code and action: codes.py. A check may judge several criteria and
subjects (each GPU set, each pair, each fabric): every one is an Item, and the check's headline is its
worst item (a failing one first, then the smallest headroom).

Headroom: the distance to the threshold as a fraction of it, positive when passing. For a minimum
(measured >= threshold) it is measured / threshold - 1; for a maximum (measured <= threshold) it is
1 - measured / threshold. Equality checks (the wiring) have no headroom.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fabricbench.exitcodes import Exit
from fabricbench.qualifying.codes import CODES, code_for
from fabricbench.results.schema import header
from fabricbench.results.status import (KIND_STATUSES, VERDICT_OK, Severity, Status, parse,
                                        parse_severity)
from fabricbench.results.status import worst as worst_severity

# The vocabularies are results/status.py's: a verdict's status (KIND_STATUSES["verdict"]) and its severity.
STATUSES = (Status.PASS, Status.FAIL, Status.WAIVED, Status.ERROR)
assert frozenset(STATUSES) == KIND_STATUSES["verdict"]
OK_STATUSES = VERDICT_OK  # exit 0 when every verdict is one of these
SEVERITIES = tuple(Severity)  # from best to worst
RANK = {s: s.rank for s in Severity}
# The exit status by the worst severity (2 is bad input, never a verdict).
EXIT = {Severity.PASS: Exit.OK, Severity.INFO: Exit.OK, Severity.CRITICAL: Exit.FAILED, Severity.UNKNOWN: Exit.UNKNOWN,
        Severity.WARNING: Exit.WARNING}
# Criteria whose miss is a warning by default: a spread or a small-message time moves with load and
# clocks; it says "look", not "drain". Every floor (bandwidth, links, counts, correctness) is critical.
WARNING_CRITERIA = frozenset({"cv", "latency", "vs baseline"})
# A run in which no check measured anything (all waived) has an outcome of its own, and an exit status.
NOTHING_MEASURED = "nothing measured"
EXIT_NOTHING_MEASURED = Exit.NOTHING_MEASURED
NO_GPU = "no GPU here: nothing of this spec can be measured"  # a GPU spec where none is visible (exit 5)
CPU_SPEC = "builtin:cpu-lab"  # what such a machine can qualify instead: gloo ranks on its CPU


@dataclass(frozen=True, kw_only=True)
class Policy:
    """How a check's misses are graded (spec keys `severity`, `warn_fraction`)."""

    severity: Severity | None = None  # of a miss; None: WARNING_CRITERIA warn, the rest are critical
    warn_fraction: float | None = None  # a floor missed by less than this fraction is a warning

    def grade(self, item: "Item") -> Severity:
        if item.status == Status.PASS:
            return Severity.PASS
        if item.status == Status.WAIVED:
            return Severity.INFO
        if item.status == Status.ERROR:
            return Severity.UNKNOWN
        sev = Severity(self.severity) if self.severity else (
            Severity.WARNING if item.criterion in WARNING_CRITERIA else Severity.CRITICAL)
        if sev == Severity.CRITICAL and self.warn_fraction is not None and _in_band(item, self.warn_fraction):
            return Severity.WARNING
        return sev


def _in_band(item: "Item", warn_fraction: float) -> bool:
    """A floor met by measured / warn_fraction (a ceiling met by measured x warn_fraction): near miss."""
    m, t = item.measured, item.threshold
    if not isinstance(m, (int, float)) or not isinstance(t, (int, float)) or isinstance(m, bool):
        return False
    if item.sense == "min":
        return m >= t * warn_fraction
    if item.sense == "max":
        return m * warn_fraction <= t
    return False


@dataclass(kw_only=True)
class Item:
    """One criterion on one subject: e.g. busbw of GPUs [0,1] at 1 GiB >= 300 GB/s."""

    criterion: str  # "min_busbw_gbps", "link", "transport"...
    status: Status
    subject: str | None = None  # "GPUs 0,1", "GPU0->GPU4", "fabric p2p-off"
    measured: float | str | None = None
    threshold: float | str | None = None
    unit: str = ""
    sense: str | None = None  # "min", "max" or "equal"
    headroom: float | None = None
    reason: str | None = None
    severity: Severity | None = None  # set when the check's verdict is combined (Policy.grade)
    code: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)  # a plain string read back from verdicts.json becomes the enum
        assert self.status in STATUSES, self.status
        if self.severity is not None:
            self.severity = Severity(self.severity)

    def text(self) -> str:
        """'GPUs 0,1: 289.1 GB/s < 300 GB/s (-3.6%)' — the numbers a failure carries."""
        subj = f"{self.subject}: " if self.subject else ""
        if self.status in (Status.WAIVED, Status.ERROR) and self.measured is None:
            return f"{subj}{self.criterion} {self.status}: {self.reason}"
        rel = {"min": ">=", "max": "<=", "equal": "=="}.get(self.sense or "", "vs")
        ok = self.status == Status.PASS
        op = rel if ok else {">=": "<", "<=": ">", "==": "!="}.get(rel, "vs")
        m = f" ({self.headroom:+.1%})" if self.headroom is not None else ""
        why = f"; {self.reason}" if self.reason and not ok else ""
        return (f"{subj}{self.criterion} {_fmt(self.measured)}{_unit(self.unit)} {op} "
                f"{_fmt(self.threshold)}{_unit(self.unit)}{m}{why}")


def at_least(criterion: str, measured: float, threshold: float, *, unit: str = "", subject: str | None = None,
             reason: str | None = None) -> Item:
    headroom = measured / threshold - 1 if threshold else None
    return Item(criterion=criterion, status=Status.PASS if measured >= threshold else Status.FAIL, subject=subject,
                measured=measured, threshold=threshold, unit=unit, sense="min", headroom=headroom, reason=reason)


def at_most(criterion: str, measured: float, threshold: float, *, unit: str = "", subject: str | None = None,
            reason: str | None = None) -> Item:
    headroom = 1 - measured / threshold if threshold else None
    return Item(criterion=criterion, status=Status.PASS if measured <= threshold else Status.FAIL, subject=subject,
                measured=measured, threshold=threshold, unit=unit, sense="max", headroom=headroom, reason=reason)


def equal(criterion: str, measured: Any, expected: Any, *, subject: str | None = None,
          ok: bool | None = None, reason: str | None = None) -> Item:
    good = (measured == expected) if ok is None else ok
    return Item(criterion=criterion, status=Status.PASS if good else Status.FAIL, subject=subject, measured=measured,
                threshold=expected, sense="equal", reason=reason)


def waived(criterion: str, reason: str, subject: str | None = None) -> Item:
    return Item(criterion=criterion, status=Status.WAIVED, subject=subject, reason=reason)


def error(criterion: str, reason: str, subject: str | None = None) -> Item:
    return Item(criterion=criterion, status=Status.ERROR, subject=subject, reason=reason)


@dataclass(kw_only=True)
class Verdict:
    check: str  # the check's name in the spec
    kind: str  # its kind (a key of CHECKS)
    status: Status
    measured: float | str | None = None  # the headline item's
    threshold: float | str | None = None
    unit: str = ""
    sense: str | None = None
    headroom: float | None = None
    criterion: str | None = None
    subject: str | None = None
    reason: str | None = None
    items: list[Item] = field(default_factory=list)
    duration_s: float = 0.0
    description: str | None = None
    severity: Severity = Severity.PASS
    code: str = "FB_PASS"
    action: str = ""
    source: str | None = None  # where the check's threshold comes from (the spec's `source`)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # every try: status, severity, measured
    # other processes loaded the host while the check measured (hostload.records_note): its figure is
    # theirs as much as the node's
    busy_host: str | None = None

    KIND: ClassVar[str] = "verdict"  # its record kind (results/records.py reads it typed: Records.typed)

    def __post_init__(self) -> None:
        self.status = Status(self.status)  # plain strings (from_record) become the enums; a stranger raises
        self.severity = Severity(self.severity)
        assert self.status in STATUSES, self.status

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def message(self) -> str:
        """One line with the numbers: what JUnit's failure message and the terminal table show."""
        head = self.items and next((i for i in self.items if i.criterion == self.criterion
                                    and i.subject == self.subject), None)
        if head:
            text = head.text()
        else:
            text = self.reason or ""
        bad = [i for i in self.items if i.status == self.status and i is not head]
        if self.status in (Status.FAIL, Status.ERROR) and bad:
            text += f" (and {len(bad)} more {self.status}{'s' if len(bad) > 1 else ''})"
        return text

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["message"] = self.message()
        return d

    def to_record(self, run_id: str) -> dict[str, Any]:
        """A kind "verdict" record: the header's `kind` stays "verdict"; the check's kind is `check_kind`."""
        body = self.to_dict()
        body["check_kind"] = body.pop("kind")
        return {**header(self.KIND, run_id=run_id), **body}

    @classmethod
    def from_record(cls, d: Any) -> "Verdict | None":
        """The Verdict a verdict record (to_record) or a verdicts.json entry (to_dict) holds, or None when it
        holds none (no check name, a status no verdict has: another machine's damaged file). A run from
        before severities gets the severity its status grades to (Policy.grade of a miss: critical); a
        missing code is FB_PASS for a pass, FB_FAIL otherwise. Items that do not type are left out."""
        if not isinstance(d, dict) or not isinstance(d.get("check"), str):
            return None
        status = parse(d.get("status"), cls.KIND)
        if status is None:
            return None
        kind = d.get("check_kind") if d.get("kind") == cls.KIND else d.get("kind")
        severity = parse_severity(d.get("severity")) or _GRADE.get(status, Severity.CRITICAL)
        code = d.get("code") if isinstance(d.get("code"), str) else (
            "FB_PASS" if severity == Severity.PASS else "FB_FAIL")
        names = {f.name for f in dataclasses.fields(cls)} - {"check", "kind", "status", "severity", "code", "items"}
        body = {k: v for k, v in d.items() if k in names}
        item_names = {f.name for f in dataclasses.fields(Item)}
        items = []
        for i in d.get("items") or []:
            if isinstance(i, dict) and isinstance(i.get("criterion"), str) and parse(i.get("status"), cls.KIND):
                items.append(Item(**{k: v for k, v in i.items() if k in item_names and k != "severity"},
                                  severity=parse_severity(i.get("severity"))))
        return cls(check=d["check"], kind=str(kind or "unknown"), status=status, severity=severity, code=code,
                   items=items, **body)


# What a verdict's status grades to when its record names no severity (runs from before severities).
_GRADE = {Status.PASS: Severity.PASS, Status.WAIVED: Severity.INFO, Status.ERROR: Severity.UNKNOWN,
          Status.FAIL: Severity.CRITICAL}


def combine(check: str, kind: str, items: list[Item], *, description: str | None = None,
            policy: Policy | None = None, source: str | None = None) -> Verdict:
    """The check's verdict from its items: any error -> error, else any fail -> fail, else pass; all
    waived -> waived. Each item is graded (Policy); the headline is the worst item of the verdict's
    status (the gravest severity, then the smallest headroom). Severity, code and action follow it."""
    policy = policy or Policy()
    if not items:
        items = [error(kind, "nothing was judged (no item)")]
    for i in items:
        i.severity = policy.grade(i)
        i.code = _code(kind, i).code
    statuses = {i.status for i in items}
    if Status.ERROR in statuses:
        status = Status.ERROR
    elif Status.FAIL in statuses:
        status = Status.FAIL
    elif Status.PASS in statuses:
        status = Status.PASS
    else:
        status = Status.WAIVED
    pool = [i for i in items if i.status == status]
    head = min(pool, key=lambda i: (-RANK[i.severity], i.headroom is None,
                                    i.headroom if i.headroom is not None else 0.0))
    if status == Status.FAIL:  # an equality failure (no headroom) is as bad as it gets: show it first
        head = next((i for i in pool if i.headroom is None and i.severity == head.severity), head)
    severity = worst_severity(i.severity for i in items)
    code = _code(kind, head) if status != Status.PASS else CODES.get("FB_PASS")
    return Verdict(check=check, kind=kind, status=status, measured=head.measured, threshold=head.threshold,
                   unit=head.unit, sense=head.sense, headroom=head.headroom, criterion=head.criterion,
                   subject=head.subject, reason=head.reason, items=items, description=description,
                   severity=severity, code=code.code, action=code.action, source=source)


def _code(kind: str, item: Item):
    if item.status == Status.PASS:
        return CODES.get("FB_PASS")
    if item.status == Status.WAIVED:
        return CODES.get("FB_WAIVED")
    if item.status == Status.ERROR:
        return CODES.get("FB_UNMEASURED")
    return code_for(kind, item.criterion)


def flaky(v: Verdict, misses: list[Verdict]) -> Verdict:
    """A pass that came after misses: a warning, FB_FLAKY, with what the misses measured."""
    code = CODES.get("FB_FLAKY")
    v.severity, v.code = Severity.WARNING, code.code
    v.action = code.action
    v.reason = f"passed on attempt {len(misses) + 1} after {len(misses)} miss(es): " + "; ".join(
        m.message() for m in misses)
    return v


def busy(v: Verdict, note: str, *, why: str) -> Verdict:
    """A miss on a busy host that no quiet attempt settled (`why` says how): unknown (FB_BUSY_HOST), never
    critical on the load alone; the miss's numbers stay in its items and attempts."""
    code = CODES.get("FB_BUSY_HOST")
    miss = v.message()
    v.busy_host = note
    v.status, v.severity, v.code, v.action = Status.ERROR, Severity.UNKNOWN, code.code, code.action
    v.reason = f"busy host ({why}): {note}; the miss: {miss}"
    return v


def attempt_record(n: int, v: Verdict) -> dict[str, Any]:
    return {"attempt": n, "status": v.status, "severity": v.severity, "code": v.code, "measured": v.measured,
            "threshold": v.threshold, "headroom": v.headroom, "duration_s": round(v.duration_s, 3),
            "message": v.message()}


def worst(verdicts: list[Verdict]) -> Severity:
    return worst_severity(v.severity for v in verdicts)


def measured_nothing(verdicts: list[Verdict]) -> bool:
    """No check measured anything: every verdict waived (or none at all). Such a run is not a pass: a CI
    gate that went green on it would have checked nothing (`qualify --spec builtin:h200-sxm-8 --from
    FILE` with records that no check can use)."""
    return all(v.status == Status.WAIVED for v in verdicts)


def outcome(verdicts: list[Verdict]) -> str:
    """The run's one word: "passed", "nothing measured", or the worst severity (critical, unknown, warning)."""
    if measured_nothing(verdicts):
        return NOTHING_MEASURED
    sev = worst(verdicts)
    return "passed" if EXIT[sev] == 0 else str(sev)


def exit_code(verdicts: list[Verdict]) -> int:
    """By the worst severity: 0 pass or info, 1 critical, 3 unknown (not measured), 4 warning; and 5 when no
    check measured anything (every verdict waived), which is not a pass."""
    if measured_nothing(verdicts):
        return EXIT_NOTHING_MEASURED
    return EXIT[worst(verdicts)]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.1f}"
        if abs(v) >= 1:
            return f"{v:.3g}"
        return f"{v:.3g}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return "-" if v is None else str(v)


def _unit(u: str) -> str:
    return f" {u}" if u else ""


fmt_value = _fmt
