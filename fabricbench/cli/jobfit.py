"""`fabricbench jobfit`: a production job's collectives (NCCL Inspector) against a sweep of the same GPUs.

    fabricbench jobfit --job nccl-inspector-42/ --sweep sweep.jsonl
    fabricbench jobfit --job host-pid7.log.gz --sweep study/ --json --plot jobfit.png

This layer only maps flags to fabricbench.jobfit (fabricbench/relating/jobfit_run.py), whose config declares
every option and decides; the table and the plot are drawn here from what it returns (relating/jobfit_io.py).
"""

from __future__ import annotations

import click

from fabricbench.cli import warn
from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON, PLOT
from fabricbench.files import dumps, refuse_collisions
from fabricbench.measuring.child_sweeps import check_plot_path
from fabricbench.relating import jobfit_io
from fabricbench.relating.jobfit_run import JobfitConfig, jobfit
from fabricbench.reporting.table import fit_lines


@click.command()
@declared_option(JobfitConfig, "job", multiple=True)
@declared_option(JobfitConfig, "sweep")
@declared_option(JobfitConfig, "fabric")
@option(JSON, "as_json", help="Print one JSON object (rows, findings, problems).")
@option(PLOT, "plot_path", help="Write job calls against the swept curve to this PNG.")
def jobfit_command(job, sweep, fabric, as_json, plot_path) -> None:
    """Each collective and size the job ran: its busbw beside the sweep's, the ratio, and where it falls short."""
    check_plot_path(plot_path)  # where the plot goes is checked before anything is read
    refuse_collisions({"--plot": plot_path}, {**{j: j for j in job}, sweep: sweep})
    result = jobfit(JobfitConfig(job=job, sweep=sweep, fabric=fabric))
    for w in result.warnings:
        warn(w)
    if plot_path:
        jobfit_io.plot(result.fit, result.job, plot_path)
    if as_json:
        click.echo(dumps(result.to_dict(), indent=2))
        return
    click.echo("\n".join(fit_lines([jobfit_io.format_text(result.fit)])))
