"""JUnit XML of a qualification: one testcase per check, so that CI systems (Jenkins, GitLab, GitHub
test reporters) show each check and, for a failure, its numbers.

    fabricbench qualify --spec node.toml --out q/      -> q/junit.xml

By severity (verdict.py): critical -> <failure type="critical">; unknown (not measured) -> <error>;
warning -> <failure type="warning"> (CI shows it; the exit status, 4, says it is only a warning);
info (waived) -> <skipped>; pass -> an empty testcase (items in system-out). Every testcase carries
<properties> severity, code and action. A fleet's junit.xml (a testcase per node: fleet_report.py) is built
by the same `document`.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from fabricbench.qualifying.verdict import Verdict
from fabricbench.results.status import Severity, Status

_FAILURES = (Severity.CRITICAL, Severity.WARNING)  # a <failure>; the exit status tells the two apart


def xml_text(text: str) -> str:
    """XML 1.0 cannot hold most control characters (a child's stderr, a hostile file): shown escaped."""
    return "".join(c if c in "\t\n\r" or (" " <= c and c not in "\ufffe\uffff" and not "\ud800" <= c <= "\udfff")
                   else ascii(c)[1:-1] for c in text)


@dataclass(kw_only=True)
class Case:
    """One <testcase>: its properties, an outcome element (failure, error or skipped) and system-out."""

    name: str
    classname: str
    time: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    outcome: str | None = None  # "failure", "error", "skipped" or None (passed)
    message: str = ""
    type: str | None = None
    body: str = ""  # the outcome element's text
    out: str = ""  # <system-out>


def document(name: str, suite: str, counts: dict[str, str], cases: Iterable[Case], **suite_attrs: str) -> str:
    """<testsuites name=...> holding one <testsuite>: the JUnit document of a node's checks (to_xml) or of a
    fleet's nodes (fleet_report.py). `counts` (tests, failures, errors...) go on both elements."""
    root = ET.Element("testsuites", name=name, **counts)
    ts = ET.SubElement(root, "testsuite", name=xml_text(suite), **counts, **suite_attrs)
    for c in cases:
        tc = ET.SubElement(ts, "testcase", name=xml_text(c.name), classname=c.classname,
                           **({"time": c.time} if c.time is not None else {}))
        props = ET.SubElement(tc, "properties")
        for k, val in c.properties.items():
            ET.SubElement(props, "property", name=k, value=xml_text(val))
        if c.outcome is not None:
            el = ET.SubElement(tc, c.outcome, message=c.message, **({"type": c.type} if c.type else {}))
            el.text = c.body or None
        if c.out:
            ET.SubElement(tc, "system-out").text = c.out
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _case(v: Verdict) -> Case:
    body = xml_text("\n".join(i.text() for i in v.items))
    message = xml_text(v.message())
    c = Case(name=v.check, classname=f"qualify.{v.kind}", time=f"{v.duration_s:.3f}",
             properties={"severity": v.severity, "code": v.code, "action": v.action,
                         "attempts": str(len(v.attempts) or 1),
                         **({"busy_host": v.busy_host} if v.busy_host else {})})
    if v.severity in _FAILURES and v.status != Status.PASS:
        c.outcome, c.message, c.type = "failure", message, v.severity
        c.body = body + (f"\naction: {xml_text(v.action)}" if v.action else "")
    elif v.severity == Severity.WARNING:  # flaky: passed on a retry
        c.outcome, c.message, c.type, c.body = "failure", xml_text(v.reason or message), Severity.WARNING, body
    elif v.severity == Severity.UNKNOWN:
        c.outcome, c.message, c.type, c.body = "error", message, Severity.UNKNOWN, body
    elif v.status == Status.WAIVED or v.severity == Severity.INFO:
        c.outcome, c.message = "skipped", xml_text(f"{v.severity}: {v.reason or v.message()}")
    if v.status == Status.PASS and v.severity == Severity.PASS and body:
        c.out = body
    return c


def to_xml(verdicts: Sequence[Verdict], *, suite: str, host: str | None = None, timestamp: str | None = None) -> str:
    failures = sum(1 for v in verdicts if v.severity in _FAILURES)
    errors = sum(1 for v in verdicts if v.severity == Severity.UNKNOWN)
    skipped = sum(1 for v in verdicts if v.status == Status.WAIVED)
    total_time = sum(v.duration_s for v in verdicts)
    counts = {"tests": str(len(verdicts)), "failures": str(failures), "errors": str(errors),
              "skipped": str(skipped), "time": f"{total_time:.3f}"}
    return document("fabricbench qualify", suite, counts, map(_case, verdicts),
                    hostname=xml_text(host or socket.gethostname()), **({"timestamp": timestamp} if timestamp else {}))
