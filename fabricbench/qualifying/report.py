"""How a qualification reads: the terminal table and DIR/report.md + report.html (report/document.py).

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/     (prints the table, writes the report)

Rows: check, kind, status, severity, code, measured, threshold, headroom, subject, and the reason where it
is not a pass; under the table, each non-passing check's action. The report ends with the command that
reproduces the run (every flag that shaped it: QualifyConfig.reproduce_line).
"""

from __future__ import annotations

from pathlib import Path

from fabricbench.qualifying.result import QualifyResult
from fabricbench.qualifying.verdict import CPU_SPEC, NO_GPU, Verdict, fmt_value
from fabricbench.results.status import Severity, Status
from fabricbench.reporting import table as tables
from fabricbench.reporting.document import Document


COLS = (tables.Col("check", justify="left", key=True), tables.Col("kind", justify="left"),
        tables.Col("status", justify="left"), tables.Col("severity", justify="left"),
        tables.Col("code", justify="left"), tables.Col("measured"), tables.Col("threshold"),
        tables.Col("headroom"), tables.Col("subject", justify="left", prose=True),
        tables.Col("note", justify="left", prose=True))
HEADERS = [c.name for c in COLS]
SHOW_ITEMS = 12  # failing items listed under the terminal table per check (all are in verdicts.json)
_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.ERROR: "bold red", Status.WAIVED: "dim"}
_SEV_STYLE = {Severity.PASS: "green", Severity.INFO: "dim", Severity.WARNING: "yellow",
              Severity.UNKNOWN: "bold yellow", Severity.CRITICAL: "bold red"}
# Severities whose check has an action to show (a pass or an info needs none).
_ACT_ON = (Severity.WARNING, Severity.UNKNOWN, Severity.CRITICAL)


def row(v: Verdict) -> list[str]:
    unit = f" {v.unit}" if v.unit and v.measured is not None else ""
    rel = {"min": ">= ", "max": "<= ", "equal": ""}.get(v.sense or "", "")
    threshold = f"{rel}{fmt_value(v.threshold)}{unit}" if v.threshold is not None else "-"
    note = v.reason or ""
    if v.status == Status.PASS:
        note = ""
    elif v.status in (Status.FAIL, Status.ERROR):
        more = sum(1 for i in v.items if i.status == v.status) - 1
        if more > 0:
            note = (note + "; " if note else "") + f"{more} more {v.status}"
    if v.code == "FB_FLAKY":
        note = v.reason or ""
    return [v.check, v.kind, v.status, v.severity, v.code,
            f"{fmt_value(v.measured)}{unit}" if v.measured is not None else "-",
            threshold, f"{v.headroom:+.1%}" if v.headroom is not None else "-", v.subject or "-", note]


def render(res: QualifyResult, console=None) -> None:
    from rich.markup import escape
    from rich.text import Text

    console = console or tables.console()
    if res.verdicts and all(v.status == Status.WAIVED and v.reason == NO_GPU for v in res.verdicts):
        # a GPU spec on a machine with none: one line, not a row and a "drain the node" action per check
        console.print(f"{NO_GPU} (exit {res.exit_code}); without a GPU, qualify the CPU lab instead: "
                      f"fabricbench qualify --spec {CPU_SPEC}" + (f"; outputs in {escape(res.out)}" if res.out else ""))
        return
    rows = []
    for v in res.verdicts:
        cells: list = row(v)
        cells[2] = Text(v.status, style=_STYLE[v.status])
        cells[3] = Text(v.severity, style=_SEV_STYLE[v.severity])
        rows.append(cells)
    tables.render(console, f"fabricbench qualify: {res.spec.name} ({res.spec.path}) on {res.host}", COLS, rows)
    for v in res.verdicts:  # every failing item, so that an operator sees all the bad pairs, not one
        bad = [i for i in v.items if i.status in (Status.FAIL, Status.ERROR)]
        for i in bad[:SHOW_ITEMS]:
            console.print(f"  [red]{v.check}[/red] {escape(i.text())}")
        if len(bad) > SHOW_ITEMS:
            console.print(f"  [red]{v.check}[/red] ... {len(bad) - SHOW_ITEMS} more in verdicts.json")
    for v in res.verdicts:
        if v.severity in _ACT_ON and v.action:
            console.print(f"  [bold]{v.check}[/bold] {v.code}: {escape(v.action)}")
    for note in res.notes:
        console.print(f"[yellow]note[/yellow]: {escape(note)}")
    d = res.to_dict()
    counts, sev = d["counts"], d["severities"]
    word = res.outcome.upper()
    console.print(f"[bold]{word}[/bold] (exit {res.exit_code}): {sev[Severity.CRITICAL]} critical, "
                  f"{sev[Severity.UNKNOWN]} unknown, {sev[Severity.WARNING]} warning, {counts[Status.PASS]} pass, "
                  f"{counts[Status.WAIVED]} waived"
                  + (f"; outputs in {res.out}" if res.out else ""))


def write_report(res: QualifyResult, out: Path) -> dict[str, str]:
    """report.md and report.html in `out`; returns their paths by name."""
    d = res.to_dict()
    counts, sev = d["counts"], d["severities"]
    word = {"passed": "passed", "nothing measured": "was not qualified: no check measured anything"}.get(
        res.outcome, f"is {res.outcome}")
    level = f", level {res.spec.level}" if res.spec.level else ""
    doc = Document(f"Qualification: {res.spec.name}", subtitle=f"{res.host}, run {res.run_id}{level}")
    s = doc.section("Verdict", intro=(f"The node {word}: {counts[Status.PASS]} checks passed, {counts[Status.FAIL]} "
                                      f"missed ({sev[Severity.CRITICAL]} critical, {sev[Severity.WARNING]} warning), "
                                      f"{counts[Status.ERROR]} could not be measured, {counts[Status.WAIVED]} were "
                                      f"waived. Exit status "
                                      f"{res.exit_code} (0 pass, 1 critical, 3 unknown, 4 warning, 5 nothing measured)."))
    if res.spec.description:
        s.text(res.spec.description)
    if res.spec.source:
        s.text(f"Thresholds: {res.spec.source}")
    s.table(HEADERS, [row(v) for v in res.verdicts], status_col=3)
    todo = [v for v in res.verdicts if v.severity in _ACT_ON and v.action]
    if todo:
        s.table(["check", "severity", "code", "action"], [[v.check, v.severity, v.code, v.action] for v in todo],
                caption="What to do", status_col=1)
    for note in res.notes:
        s.text(note)
    d = doc.section("Details", intro="Every criterion each check judged, with the numbers.")
    for v in res.verdicts:
        d.text(f"**{v.check}** ({v.kind}): {v.status}, {v.severity}" + (f" — {v.description}" if v.description
                                                                          else "")
               + (f" Threshold source: {v.source}." if v.source else ""))
        if v.busy_host:
            d.text(f"Busy host while it measured: {v.busy_host}.")
        if len(v.attempts) > 1:
            d.text("Attempts: " + "; ".join(f"{a['attempt']}: {a['status']} ({a['message']})" for a in v.attempts))
        d.table(["criterion", "subject", "status", "measured", "threshold", "headroom", "note"],
                [[i.criterion, i.subject or "-", i.status,
                  f"{fmt_value(i.measured)}{(' ' + i.unit) if i.unit and i.measured is not None else ''}",
                  fmt_value(i.threshold), f"{i.headroom:+.1%}" if i.headroom is not None else "-",
                  i.reason or ""] for i in v.items], status_col=2)
    r = doc.section("Reproduce")
    r.code(res.reproduce or f"fabricbench qualify --spec {res.spec.path} --out {res.out}")
    r.text("The spec as run is spec.toml beside this report; every measurement is in results.jsonl; "
           "junit.xml holds one testcase per check.")
    md, html = doc.write(out, stem="report")
    return {"report_md": str(md), "report_html": str(html)}

