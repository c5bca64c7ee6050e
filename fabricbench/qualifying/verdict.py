"""Verdicts: what a check concluded, with the number measured, the threshold and the margin between them.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/      (q/verdicts.json holds these)

status: "pass", "fail", "waived" (cannot apply here; `reason` says why, e.g. a pair check on one GPU) or
"error" (could not be measured; `reason` says what went wrong). A check may judge several criteria and
subjects (each GPU set, each pair, each fabric): every one is an Item, and the check's headline is its
worst item (a failing one first, then the smallest margin).

Margin: the headroom as a fraction of the threshold, positive when passing. For a minimum
(measured >= threshold) it is measured / threshold - 1; for a maximum (measured <= threshold) it is
1 - measured / threshold. Equality checks (the wiring) have no margin.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("pass", "fail", "waived", "error")
OK_STATUSES = ("pass", "waived")  # exit 0 when every verdict is one of these


@dataclass(kw_only=True)
class Item:
    """One criterion on one subject: e.g. busbw of GPUs [0,1] at 1 GiB >= 300 GB/s."""

    criterion: str  # "min_busbw_gbps", "link", "transport"...
    status: str
    subject: str | None = None  # "GPUs 0,1", "GPU0->GPU4", "fabric p2p-off"
    measured: float | str | None = None
    threshold: float | str | None = None
    unit: str = ""
    sense: str | None = None  # "min", "max" or "equal"
    margin: float | None = None
    reason: str | None = None

    def text(self) -> str:
        """'GPUs 0,1: 289.1 GB/s < 300 GB/s (-3.6%)' — the numbers a failure carries."""
        subj = f"{self.subject}: " if self.subject else ""
        if self.status in ("waived", "error") and self.measured is None:
            return f"{subj}{self.criterion} {self.status}: {self.reason}"
        rel = {"min": ">=", "max": "<=", "equal": "=="}.get(self.sense or "", "vs")
        ok = self.status == "pass"
        op = rel if ok else {">=": "<", "<=": ">", "==": "!="}.get(rel, "vs")
        m = f" ({self.margin:+.1%})" if self.margin is not None else ""
        why = f"; {self.reason}" if self.reason and not ok else ""
        return (f"{subj}{self.criterion} {_fmt(self.measured)}{_unit(self.unit)} {op} "
                f"{_fmt(self.threshold)}{_unit(self.unit)}{m}{why}")


def at_least(criterion: str, measured: float, threshold: float, *, unit: str = "", subject: str | None = None,
             reason: str | None = None) -> Item:
    margin = measured / threshold - 1 if threshold else None
    return Item(criterion=criterion, status="pass" if measured >= threshold else "fail", subject=subject,
                measured=measured, threshold=threshold, unit=unit, sense="min", margin=margin, reason=reason)


def at_most(criterion: str, measured: float, threshold: float, *, unit: str = "", subject: str | None = None,
            reason: str | None = None) -> Item:
    margin = 1 - measured / threshold if threshold else None
    return Item(criterion=criterion, status="pass" if measured <= threshold else "fail", subject=subject,
                measured=measured, threshold=threshold, unit=unit, sense="max", margin=margin, reason=reason)


def equal(criterion: str, measured: Any, expected: Any, *, subject: str | None = None,
          ok: bool | None = None, reason: str | None = None) -> Item:
    good = (measured == expected) if ok is None else ok
    return Item(criterion=criterion, status="pass" if good else "fail", subject=subject, measured=measured,
                threshold=expected, sense="equal", reason=reason)


def waived(criterion: str, reason: str, subject: str | None = None) -> Item:
    return Item(criterion=criterion, status="waived", subject=subject, reason=reason)


def error(criterion: str, reason: str, subject: str | None = None) -> Item:
    return Item(criterion=criterion, status="error", subject=subject, reason=reason)


@dataclass(kw_only=True)
class Verdict:
    check: str  # the check's name in the spec
    kind: str  # its kind (a key of CHECKS)
    status: str
    measured: float | str | None = None  # the headline item's
    threshold: float | str | None = None
    unit: str = ""
    sense: str | None = None
    margin: float | None = None
    criterion: str | None = None
    subject: str | None = None
    reason: str | None = None
    items: list[Item] = field(default_factory=list)
    duration_s: float = 0.0
    description: str | None = None

    def __post_init__(self) -> None:
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
        if self.status in ("fail", "error") and bad:
            text += f" (and {len(bad)} more {self.status}{'s' if len(bad) > 1 else ''})"
        return text

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["message"] = self.message()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        names = {f.name for f in dataclasses.fields(cls)}
        body = {k: v for k, v in d.items() if k in names and k != "items"}
        item_names = {f.name for f in dataclasses.fields(Item)}
        items = [Item(**{k: v for k, v in i.items() if k in item_names}) for i in d.get("items", [])]
        return cls(**body, items=items)


def combine(check: str, kind: str, items: list[Item], *, description: str | None = None) -> Verdict:
    """The check's verdict from its items: any error -> error, else any fail -> fail, else pass; all
    waived -> waived. The headline is the worst item of the verdict's status (smallest margin)."""
    if not items:
        return Verdict(check=check, kind=kind, status="error", reason="nothing was judged (no item)",
                       description=description)
    statuses = {i.status for i in items}
    if "error" in statuses:
        status = "error"
    elif "fail" in statuses:
        status = "fail"
    elif "pass" in statuses:
        status = "pass"
    else:
        status = "waived"
    pool = [i for i in items if i.status == status]
    head = min(pool, key=lambda i: (i.margin is None, i.margin if i.margin is not None else 0.0))
    if status == "fail":  # an equality failure (no margin) is as bad as it gets: show it first
        head = next((i for i in pool if i.margin is None), head)
    return Verdict(check=check, kind=kind, status=status, measured=head.measured, threshold=head.threshold,
                   unit=head.unit, sense=head.sense, margin=head.margin, criterion=head.criterion,
                   subject=head.subject, reason=head.reason, items=items, description=description)


def exit_code(verdicts: list[Verdict]) -> int:
    """0 when every check passed or was waived, 1 when any failed or errored."""
    return 0 if all(v.ok for v in verdicts) else 1


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
