"""`fabricbench report DIR`: rebuild a study's report.md and report.html from its results.jsonl.

    fabricbench report run/
    fabricbench report run/ --json      (the summary only: comparisons with verdicts, rankings, slowdowns)

Nothing is measured: the report is drawn again from the records (fabricbench/studying/report/), so a
study interrupted and resumed, or one copied from another machine, gets its report the same way.
"""

from __future__ import annotations

import os

import click

from fabricbench.cli.types import InputPath
from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON

from fabricbench.errors import UsageError
from fabricbench.files import check_writable, dumps
from fabricbench.studying import records
from fabricbench.studying.report import answer_lines, summary, write_report

NOTES_SHOWN = 5  # a badly damaged file would otherwise print one note per line


@click.command()
@click.argument("out_dir", type=InputPath(folder_only=True))
@option(JSON, "as_json",
        help="Print the summary as JSON ({comparisons, rankings, slowdowns, figures, ...}); write nothing.")
def report(out_dir, as_json) -> None:
    """Rebuild DIR/report.md and DIR/report.html from DIR/results.jsonl, measuring nothing."""
    if not as_json:  # where the report goes is checked before anything is read or drawn
        for name in ("report.md", "report.html"):
            path = os.path.join(out_dir, name)
            if os.path.lexists(path) and not os.path.isfile(path):
                raise UsageError(f"{path} is not a file, and the report is rebuilt as that file; move it aside")
        check_writable(out_dir, what="the report folder", folder=True)
    sr = records.load(out_dir)  # a directory without results is a one-line error
    for w in sr.warnings[:NOTES_SHOWN]:
        click.echo(f"note: {w}", err=True)
    if len(sr.warnings) > NOTES_SHOWN:
        click.echo(f"note: ... and {len(sr.warnings) - NOTES_SHOWN} more lines skipped", err=True)
    if as_json:
        click.echo(dumps(summary(out_dir), indent=2))  # null, never NaN
        return
    md, html = write_report(out_dir)
    click.echo(f"report: {md}\n        {html}")
    for line in answer_lines(out_dir):
        click.echo(line)
