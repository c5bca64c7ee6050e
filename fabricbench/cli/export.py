"""`fabricbench export`: results out to simulators (SimAI's busbw.yaml, a train run's communication trace).

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml [--group TP] [--fabric F] [--size 1G]
    fabricbench export sweep.jsonl --format simumax --out system.json [--fabric F] [--base system.json]
    fabricbench export train.jsonl --format comm-trace --out trace.json

This layer only maps flags to fabricbench.export (fabricbench/exporting/api.py), whose config declares
every option and decides.
"""

from __future__ import annotations

import click

from fabricbench.cli import warn
from fabricbench.cli.declared import config_options
from fabricbench.cli.types import InputPath
from fabricbench.exporting.api import ExportConfig, export


@click.command(name="export")
@click.argument("results", type=InputPath(folder=True))
@config_options(ExportConfig)
def export_command(results, **fields) -> None:
    """Write a sweep as SimAI's busbw table or SimuMax's system config, or a train trace as a per-step JSON."""
    config = ExportConfig(results=results, **fields)
    for w in config.ignored:  # said before anything is read, as a flag the format ignores is known now
        warn(w)
    result = export(config)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"{result.format}: wrote {result.out}")
