"""`fabricbench import`: other tools' results (nccl-tests, NCCL logs, nvbandwidth, NCCL Inspector, NCCL RAS,
DCGM diag) as fabricbench records, and per file what it holds and whether that is normal.

    fabricbench import all_reduce.log all_gather.json nvbandwidth.txt --out imported.jsonl
    fabricbench import nccl-inspector-42/*.log ras.json dcgm.json --out job.jsonl
    fabricbench import old/*.log --out imported.jsonl --fabric nvswitch --nranks 8
    fabricbench qualify --spec node.toml --from imported.jsonl     (judge them without measuring)

This layer only maps flags to fabricbench.import_results (fabricbench/importing/api.py), whose config declares
every option and decides (formats, records, warnings, the answer per file). The module is not called
`import`, which Python reserves.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli import warn

from fabricbench.cli.types import InputPath
from fabricbench.cli.declared import config_options, declared_option, option
from fabricbench.cli.options import JSON

from fabricbench.importing import answer
from fabricbench.importing.api import ImportConfig, import_results
from fabricbench.reporting.table import fit_lines


@click.command(name="import")
@click.argument("files", nargs=-1, required=True, type=InputPath())
@declared_option(ImportConfig, "out", required=True)  # the command always writes; the library may return them
@option(JSON, "as_json", help="Print one JSON object (per file: counts, ranks, GPUs, busbw at the largest size, "
                              "the published reference, next commands, warnings).")
@config_options(ImportConfig, only=("fabric", "nranks"))
def importer(files, out, as_json, fabric, nranks) -> None:
    """Read nccl-tests output (text or -J JSON), NCCL_DEBUG=INFO logs, nvbandwidth, NCCL Inspector (JSON, .gz,
    .prom), ncclras (text, JSON) and dcgmi diag -j into one schema, and say per file what it holds."""
    result = import_results(ImportConfig(files=files, out=out, fabric=fabric, nranks=nranks))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    for s in result.files:
        for w in s["warnings"]:
            warn(w)
        for line in fit_lines(answer.lines(s)):
            click.echo(line)
    for line in fit_lines([f"{result.records} record(s) appended to {result.out}"]):
        click.echo(line)
