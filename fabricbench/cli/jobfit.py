"""`fabricbench jobfit`: a production job's collectives (NCCL Inspector) against a sweep of the same GPUs.

    fabricbench jobfit --job nccl-inspector-42/ --sweep sweep.jsonl
    fabricbench jobfit --job host-pid7.log.gz --sweep study/ --json --plot jobfit.png

This layer only maps flags to fabricbench/relating/jobfit.py, which decides; reading and printing are in
relating/jobfit_io.py.
"""

from __future__ import annotations

import click

from fabricbench.cli.types import InputPath, Text
from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON, PLOT
from fabricbench.files import dumps, refuse_collisions
from fabricbench.measuring.compare import check_plot_path
from fabricbench.relating import jobfit, jobfit_io
from fabricbench.reporting.table import fit_lines


@click.command()
@click.option("--job", "job", type=InputPath(folder=True), multiple=True, required=True,
              help="NCCL Inspector output: files (.log, .jsonl, .gz, .prom), a folder of them, or imported records.")
@click.option("--sweep", "sweep", type=InputPath(folder=True), required=True, help="A sweep's results file, or a study folder.")
@click.option("--fabric", type=Text(), default=None, help="The sweep's fabric to compare with, when it holds several.")
@option(JSON, "as_json", help="Print one JSON object (rows, findings, problems).")
@option(PLOT, "plot_path", help="Write job calls against the swept curve to this PNG.")
def jobfit_command(job, sweep, fabric, as_json, plot_path) -> None:
    """Each collective and size the job ran: its busbw beside the sweep's, the ratio, and where it falls short."""
    check_plot_path(plot_path)
    refuse_collisions({"--plot": plot_path}, {**{j: j for j in job}, sweep: sweep})
    records, warnings = jobfit_io.load_job(list(job))
    swept, sweep_warnings = jobfit_io.load_sweep(sweep)
    for w in warnings + sweep_warnings:
        click.echo(f"warning: {w}", err=True)
    res = jobfit.fit(records, swept, fabric=fabric)
    if plot_path:
        jobfit_io.plot(res, records, plot_path)
    click.echo(dumps(res.to_dict(), indent=2) if as_json else "\n".join(fit_lines([jobfit_io.format_text(res)])))
