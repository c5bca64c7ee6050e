"""`fabricbench report DIR`: rebuild a study's report.md and report.html from its results.jsonl.

    fabricbench report run/
    fabricbench report run/ --json      (the summary only: comparisons with verdicts, rankings, slowdowns)

Nothing is measured: the report is drawn again from the records (fabricbench/studying/report/), so a
study interrupted and resumed, or one copied from another machine, gets its report the same way. This
layer only maps DIR and --json to fabricbench.report (fabricbench/studying/report_run.py).
"""

from __future__ import annotations

import click

from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON
from fabricbench.cli.types import InputPath
from fabricbench.files import dumps
from fabricbench.studying.report_run import ReportConfig
from fabricbench.studying.report_run import report as report_call

NOTES_SHOWN = 5  # a badly damaged file would otherwise print one note per line


@click.command()
@click.argument("out_dir", type=InputPath(folder_only=True))
@option(JSON, "as_json",
        help="Print the summary as JSON ({comparisons, rankings, slowdowns, figures, ...}); write nothing.")
def report(out_dir, as_json) -> None:
    """Rebuild DIR/report.md and DIR/report.html from DIR/results.jsonl, measuring nothing."""
    result = report_call(ReportConfig(folder=out_dir, write=not as_json))
    for w in result.warnings[:NOTES_SHOWN]:
        click.echo(f"note: {w}", err=True)
    if len(result.warnings) > NOTES_SHOWN:
        click.echo(f"note: ... and {len(result.warnings) - NOTES_SHOWN} more lines skipped", err=True)
    if as_json:
        click.echo(dumps(result.to_dict(), indent=2))  # null, never NaN
        return
    click.echo(f"report: {result.markdown}\n        {result.html}")
    for line in result.answer or []:
        click.echo(line)
