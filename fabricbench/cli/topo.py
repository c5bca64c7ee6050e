"""`fabricbench topo`: GPU links, NVLink islands and placement advice.

    fabricbench topo                              (NVML; `nvidia-smi topo -m` if NVML fails)
    fabricbench topo --gpus 0-3 --json
    fabricbench topo --from-file saved-topo-m.txt (an output saved on another machine)
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.types import GpuList, InputPath, OutputFile

from fabricbench.files import refuse_collisions
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.runner import new_run_id
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import snapshot_record, topology_for
from fabricbench.topology.format import render


@click.command()
@click.option("--gpus", type=GpuList(), default=None, help="GPU list to show (NVML indices): 0-7, 0,2,5. Default: all.")
@click.option("--json", "as_json", is_flag=True, help="Print the topology as one JSON object.")
@click.option("--from-file", "from_file", type=InputPath(), default=None, help="Parse a saved `nvidia-smi topo -m` output.")
@click.option("--out", "out_path", type=OutputFile(), default=None, help="Append the topology record to this JSONL file.")
def topo(gpus, as_json, from_file, out_path):
    """Show GPU links, NVLink islands, and which GPU sets stay on NVLink."""

    if gpus is not None:
        parse_gpus(gpus)  # the list's syntax before any topology is read
    refuse_collisions({"--out": out_path}, {"--from-file": from_file})
    writer = ResultWriter(out_path) if out_path else None  # opened (so checked) before anything is read
    t = topology_for(from_file, gpus)
    doc = {**t.to_dict(), "advice": t.advice(), "summary": t.summary()}
    if writer is not None:
        rec = snapshot_record(new_run_id(), topo=t)
        rec["advice"] = doc["advice"]
        writer.write(rec)
        writer.close()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    render(t, doc["advice"])
