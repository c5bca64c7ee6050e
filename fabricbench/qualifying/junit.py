"""JUnit XML of a qualification: one testcase per check, so that CI systems (Jenkins, GitLab, GitHub
test reporters) show each check and, for a failure, its numbers.

    fabricbench qualify --spec node.toml --out q/      -> q/junit.xml

By severity (verdict.py): critical -> <failure type="critical">; unknown (not measured) -> <error>;
warning -> <failure type="warning"> (CI shows it; the exit status, 4, says it is only a warning);
info (waived) -> <skipped>; pass -> an empty testcase (items in system-out). Every testcase carries
<properties> severity, code and action.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from typing import Sequence

from fabricbench.qualifying.verdict import Verdict
from fabricbench.results.status import Severity, Status

_FAILURES = (Severity.CRITICAL, Severity.WARNING)  # a <failure>; the exit status tells the two apart


def xml_text(text: str) -> str:
    """XML 1.0 cannot hold most control characters (a child's stderr, a hostile file): shown escaped."""
    return "".join(c if c in "\t\n\r" or (" " <= c and c not in "\ufffe\uffff" and not "\ud800" <= c <= "\udfff")
                   else ascii(c)[1:-1] for c in text)


def to_xml(verdicts: Sequence[Verdict], *, suite: str, host: str | None = None, timestamp: str | None = None) -> str:
    failures = sum(1 for v in verdicts if v.severity in _FAILURES)
    errors = sum(1 for v in verdicts if v.severity == Severity.UNKNOWN)
    skipped = sum(1 for v in verdicts if v.status == Status.WAIVED)
    total_time = sum(v.duration_s for v in verdicts)
    root = ET.Element("testsuites", name="fabricbench qualify", tests=str(len(verdicts)), failures=str(failures),
                      errors=str(errors), skipped=str(skipped), time=f"{total_time:.3f}")
    ts = ET.SubElement(root, "testsuite", name=xml_text(suite), tests=str(len(verdicts)), failures=str(failures),
                       errors=str(errors), skipped=str(skipped), time=f"{total_time:.3f}",
                       hostname=xml_text(host or socket.gethostname()),
                       **({"timestamp": timestamp} if timestamp else {}))
    for v in verdicts:
        tc = ET.SubElement(ts, "testcase", name=xml_text(v.check), classname=f"qualify.{v.kind}",
                           time=f"{v.duration_s:.3f}")
        props = ET.SubElement(tc, "properties")
        for k, val in (("severity", v.severity), ("code", v.code), ("action", v.action),
                       ("attempts", str(len(v.attempts) or 1))):
            ET.SubElement(props, "property", name=k, value=xml_text(val))
        body = xml_text("\n".join(i.text() for i in v.items))
        message = xml_text(v.message())
        if v.severity in _FAILURES and v.status != Status.PASS:
            el = ET.SubElement(tc, "failure", message=message, type=v.severity)
            el.text = body + (f"\naction: {xml_text(v.action)}" if v.action else "")
        elif v.severity == Severity.WARNING:  # flaky: passed on a retry
            el = ET.SubElement(tc, "failure", message=xml_text(v.reason or message), type=Severity.WARNING)
            el.text = body
        elif v.severity == Severity.UNKNOWN:
            el = ET.SubElement(tc, "error", message=message, type=Severity.UNKNOWN)
            el.text = body
        elif v.status == Status.WAIVED or v.severity == Severity.INFO:
            ET.SubElement(tc, "skipped", message=xml_text(f"{v.severity}: {v.reason or v.message()}"))
        if v.status == Status.PASS and v.severity == Severity.PASS and body:
            out = ET.SubElement(tc, "system-out")
            out.text = body
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
