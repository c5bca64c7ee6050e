"""`fabricbench fabrics`: the fabrics (NCCL environments, emulated links) a run can use.

    fabricbench fabrics [--json]
    fabricbench compare --fabrics default,p2p-off,shaped:1gbit,mine:NCCL_ALGO=Ring

Values of variables outside NCCL_*/GLOO_*/CUDA_* are never printed ("***").
"""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the fabrics as a JSON list.")
def fabrics(as_json):
    """List the built-in fabrics and families: name, variables, description, expected transport."""
    from fabricbench.fabrics import FABRICS, FAMILIES

    rows = [f.to_dict() for f in FABRICS]
    for fam in FAMILIES:  # a family's row shows an example member, and whether it can be applied here
        example = fam.make(f"{fam.name}:{fam.example}").to_dict()
        rows.append({**example, "name": fam.syntax, "description": fam.description,
                     "waived_here": fam.make(f"{fam.name}:{fam.example}").unavailable()})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Fabrics (custom: name:VAR=VAL[,VAR=VAL]; NCCL_NVLS_ENABLE is never set)")
    for col in ("name", "variables", "description", "expected transport"):
        t.add_column(col)
    for r in rows:
        desc = r["description"] + (f" [yellow](waived here: {r['waived_here']})[/yellow]"
                                   if r.get("waived_here") else "")
        t.add_row(r["name"], " ".join(f"{k}={v}" for k, v in r["env"].items()) or "(none)", desc,
                  r["expected_transport"])
    Console().print(t)
