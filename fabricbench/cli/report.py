"""`fabricbench report DIR`: rebuild a study's report.md and report.html from its results.jsonl.

    fabricbench report run/

Nothing is measured: the report is drawn again from the records (fabricbench/study/report.py), so a
study interrupted and resumed, or one copied from another machine, gets its report the same way.
"""

from __future__ import annotations

import click


@click.command()
@click.argument("out_dir", type=click.Path(file_okay=False))
def report(out_dir) -> None:
    """Rebuild DIR/report.md and DIR/report.html from DIR/results.jsonl, measuring nothing."""
    from fabricbench.study import records
    from fabricbench.study.report import write_report

    records.load(out_dir)  # a directory without results is a one-line error
    md, html = write_report(out_dir)
    click.echo(f"report: {md}\n        {html}")
