"""`fabricbench import`: other tools' results (nccl-tests, NCCL logs, nvbandwidth, NCCL Inspector, NCCL RAS,
DCGM diag) as fabricbench records, and per file what it holds and whether that is normal.

    fabricbench import all_reduce.log all_gather.json nvbandwidth.txt --out imported.jsonl
    fabricbench import nccl-inspector-42/*.log ras.json dcgm.json --out job.jsonl
    fabricbench import old/*.log --out imported.jsonl --fabric nvswitch --nranks 8
    fabricbench qualify --spec node.toml --from imported.jsonl     (judge them without measuring)

This layer only maps flags to fabricbench.importing, which decides (formats, records, warnings, the
answer per file). The module is not called `import`, which Python reserves.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli import warn

from fabricbench.cli.types import Count, InputPath, Text
from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON, OUT_FILE

from fabricbench.errors import UsageError
from fabricbench.files import refuse_collisions
from fabricbench.importing import answer, import_into
from fabricbench.importing.output import Appending
from fabricbench.reporting.table import fit_lines


@click.command(name="import")
@click.argument("files", nargs=-1, required=True, type=InputPath())
@option(OUT_FILE, "out_path", required=True, help="Append the records (JSON lines) to this file.")
@option(JSON, "as_json", help="Print one JSON object (per file: counts, ranks, GPUs, busbw at the largest size, "
                              "the published reference, next commands, warnings).")
@click.option("--fabric", type=Text(), default=None, help="The fabric label to give the records (what compare/relate group by).")
@click.option("--nranks", type=Count(1, 2**20), default=None, help="Rank count where a file does not tell it.")
def importer(files, out_path, as_json, fabric, nranks) -> None:
    """Read nccl-tests output (text or -J JSON), NCCL_DEBUG=INFO logs, nvbandwidth, NCCL Inspector (JSON, .gz,
    .prom), ncclras (text, JSON) and dcgmi diag -j into one schema, and say per file what it holds."""
    refuse_collisions({"--out": out_path}, {str(f): f for f in files})
    if fabric is not None and not fabric.strip():
        raise UsageError("--fabric is empty; give a label such as nvswitch or p2p-off")
    out = Appending(out_path)
    try:  # every file read (as a stream) before --out is replaced: a file that fails leaves it as it was
        tallies = [import_into(f, out.write, fabric=fabric, nranks=nranks) for f in files]
    except BaseException:
        out.abort()
        raise
    out.commit()
    summary = [t.summary(out_path) for t in tallies]
    records = sum(t.records for t in tallies)
    if as_json:
        click.echo(json.dumps({"out": out_path, "records": records, "files": summary}, indent=2))
        return
    for s in summary:
        for w in s["warnings"]:
            warn(w)
        for line in fit_lines(answer.lines(s)):
            click.echo(line)
    for line in fit_lines([f"{records} record(s) appended to {out_path}"]):
        click.echo(line)
