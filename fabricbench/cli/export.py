"""`fabricbench export`: results out to simulators (SimAI's busbw.yaml, a train run's communication trace).

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml [--group TP] [--fabric F] [--size 1G]
    fabricbench export sweep.jsonl --format simumax --out system.json [--fabric F] [--base system.json]
    fabricbench export train.jsonl --format comm-trace --out trace.json

This layer only maps flags to fabricbench/export, which decides.
"""

from __future__ import annotations

import click

from fabricbench.cli.types import Choice, InputPath, Size, Text
from fabricbench.cli.declared import option
from fabricbench.cli.options import OUT_FILE
from fabricbench.errors import UsageError
from fabricbench.exporting import EXPORTERS, SimaiOptions, SimumaxOptions, export
from fabricbench.files import check_output, refuse_collisions
from fabricbench.sizes import parse_size


@click.command(name="export")
@click.argument("results", type=InputPath(folder=True))
@click.option("--format", "fmt", type=Choice(EXPORTERS.names()), required=True, help=f"One of: {', '.join(EXPORTERS.names())}.")
@option(OUT_FILE, "out_path", required=True, help="The file to write (replaced).")
@click.option("--group", type=Choice(("TP", "DP", "EP", "PP")), default="TP", show_default=True, help="simai-busbw: the section the sweep fills (TP, DP, EP, PP).")
@click.option("--fabric", type=Text(), default=None, help="The fabric to export, when the results hold several.")
@click.option("--size", type=Size(), default=None, help="simai-busbw: take busbw at this size (e.g. 1G), not the largest swept.")
@click.option("--base", type=InputPath(), default=None, help="simumax: a SimuMax system config to fill (its accelerator and other networks are kept).")
def export_command(results, fmt, out_path, group, fabric, size, base) -> None:
    """Write a sweep as SimAI's busbw table or SimuMax's system config, or a train trace as a per-step JSON."""
    refuse_collisions({"--out": out_path}, {results: results, "--base": base})
    check_output(out_path, what="--out")
    try:
        nbytes = parse_size(size) if size is not None else None
    except ValueError as e:
        raise UsageError(f"--size {size}: {e}") from None
    opts = {"simai-busbw": SimaiOptions(group=group, fabric=fabric, size=nbytes),
            "simumax": SimumaxOptions(fabric=fabric, base=base)}.get(fmt)
    takes = {"simai-busbw": ("group", "fabric", "size"), "simumax": ("fabric", "base")}.get(fmt, ())
    given = (("group", group != "TP"), ("size", size is not None), ("base", base is not None),
             ("fabric", fabric is not None))
    for key in [k for k, on in given if on and k not in takes]:
        click.echo(f"warning: --{key} is ignored by --format {fmt}", err=True)
    for note in export(results, fmt, out_path, opts):
        click.echo(f"note: {note}", err=True)
    click.echo(f"{fmt}: wrote {out_path}")
