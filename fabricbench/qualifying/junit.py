"""JUnit XML of a qualification: one testcase per check, so that CI systems (Jenkins, GitLab, GitHub
test reporters) show each check and, for a failure, its numbers.

    fabricbench qualify --spec node.toml --out q/      -> q/junit.xml

fail -> <failure message="busbw 289 GB/s < 300 GB/s (-3.6%)" type="fail"> with every item in the body;
error -> <error>; waived -> <skipped message="reason">; pass -> an empty testcase (items in system-out).
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from typing import Sequence

from fabricbench.qualifying.verdict import Verdict


def to_xml(verdicts: Sequence[Verdict], *, suite: str, host: str | None = None, timestamp: str | None = None) -> str:
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in ("fail", "error", "waived")}
    total_time = sum(v.duration_s for v in verdicts)
    root = ET.Element("testsuites", name="fabricbench qualify", tests=str(len(verdicts)),
                      failures=str(counts["fail"]), errors=str(counts["error"]), skipped=str(counts["waived"]),
                      time=f"{total_time:.3f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(verdicts)), failures=str(counts["fail"]),
                       errors=str(counts["error"]), skipped=str(counts["waived"]), time=f"{total_time:.3f}",
                       hostname=host or socket.gethostname(), **({"timestamp": timestamp} if timestamp else {}))
    for v in verdicts:
        tc = ET.SubElement(ts, "testcase", name=v.check, classname=f"qualify.{v.kind}", time=f"{v.duration_s:.3f}")
        body = "\n".join(i.text() for i in v.items)
        if v.status == "fail":
            el = ET.SubElement(tc, "failure", message=v.message(), type="fail")
            el.text = body
        elif v.status == "error":
            el = ET.SubElement(tc, "error", message=v.message(), type="error")
            el.text = body
        elif v.status == "waived":
            ET.SubElement(tc, "skipped", message=f"waived: {v.reason or v.message()}")
        if v.status == "pass" and body:
            out = ET.SubElement(tc, "system-out")
            out.text = body
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
