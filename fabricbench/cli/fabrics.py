"""`fabricbench fabrics`: the fabrics (NCCL environments, emulated links) a run can use.

    fabricbench fabrics [--json]
    fabricbench compare --fabrics default,p2p-off,shaped:1gbit,mine:NCCL_ALGO=Ring

Values of variables outside NCCL_*/GLOO_*/CUDA_* are never printed ("***").
"""

from __future__ import annotations

import json

import click

from fabricbench.fabrics import listing
from fabricbench.reporting.fabrics import render
from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON


@click.command()
@option(JSON, "as_json", help="Print the fabrics as a JSON list.")
def fabrics(as_json):
    """List the built-in fabrics and families: name, variables, description, expected transport."""
    rows = listing()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    render(rows)
