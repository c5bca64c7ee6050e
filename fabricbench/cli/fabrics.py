"""`fabricbench fabrics`: the fabrics (NCCL environments, emulated links) a run can use.

    fabricbench fabrics [--json]
    fabricbench compare --fabrics default,p2p-off,shaped:1gbit,mine:NCCL_ALGO=Ring

Values of variables outside NCCL_*/GLOO_*/CUDA_* are never printed ("***").
"""

from __future__ import annotations

import json

import click

from fabricbench.fabrics import FABRICS, FAMILIES
from fabricbench.report import table as tables


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the fabrics as a JSON list.")
def fabrics(as_json):
    """List the built-in fabrics and families: name, variables, description, expected transport."""
    rows_ = [f.to_dict() for f in FABRICS]
    for fam in FAMILIES:  # a family's row shows an example member, and whether it can be applied here
        example = fam.make(f"{fam.name}:{fam.example}").to_dict()
        rows_.append({**example, "name": fam.syntax, "description": fam.description,
                     "waived_here": fam.make(f"{fam.name}:{fam.example}").unavailable()})
    if as_json:
        click.echo(json.dumps(rows_, indent=2))
        return
    from rich.text import Text

    cols = [tables.Col("name", justify="left", key=True), tables.Col("variables", justify="left", prose=True),
            tables.Col("description", justify="left", prose=True),
            tables.Col("expected transport", "transport", justify="left", prose=True)]
    rows = []
    for r in rows_:
        desc = Text(r["description"])
        if r.get("waived_here"):
            desc.append(f" (waived here: {r['waived_here']})", style="yellow")
        rows.append([r["name"], " ".join(f"{k}={v}" for k, v in r["env"].items()) or "(none)", desc,
                     r["expected_transport"]])
    tables.render(tables.console(), "Fabrics (custom: name:VAR=VAL[,VAR=VAL]; NCCL_NVLS_ENABLE is never set)",
                  cols, rows)
