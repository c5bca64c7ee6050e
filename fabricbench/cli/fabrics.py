"""`fabricbench fabrics`: the fabrics (NCCL environments) a compare or scaling run can use.

    fabricbench fabrics [--json]
    fabricbench compare --fabrics default,p2p-off,mine:NCCL_ALGO=Ring
"""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the fabrics as a JSON list.")
def fabrics(as_json):
    """List the built-in fabrics: name, variables, description, expected transport."""
    from fabricbench.fabrics import FABRICS

    rows = [f.to_dict() for f in FABRICS]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Fabrics (custom: name:VAR=VAL[,VAR=VAL]; NCCL_NVLS_ENABLE is never set)")
    for col in ("name", "variables", "description", "expected transport"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], " ".join(f"{k}={v}" for k, v in r["env"].items()) or "(none)", r["description"],
                  r["expected_transport"])
    Console().print(t)
