"""`fabricbench topo`: GPU links, NVLink islands and placement advice.

    fabricbench topo                              (NVML; `nvidia-smi topo -m` if NVML fails)
    fabricbench topo --gpus 0-3 --json
    fabricbench topo --topo-file saved-topo-m.txt (an output saved on another machine; once --from-file)
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON, OUT_FILE, TOPO_FILE
from fabricbench.measuring.config import SweepConfig

from fabricbench.files import refuse_collisions
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.runner import new_run_id
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import snapshot_record, topology_for
from fabricbench.topology.format import render


@click.command()
@declared_option(SweepConfig, "gpus", help="GPU list to show (NVML indices): 0-7, 0,2,5.")
@option(JSON, "as_json", help="Print the topology as one JSON object.")
@option(TOPO_FILE, "from_file", aliases=("--from-file",), help="Parse a saved `nvidia-smi topo -m` output.")
@option(OUT_FILE, "out_path", help="Append the topology record to this JSONL file.")
def topo(gpus, as_json, from_file, out_path):
    """Show GPU links, NVLink islands, and which GPU sets stay on NVLink."""

    if gpus is not None:
        parse_gpus(gpus)  # the list's syntax before any topology is read
    refuse_collisions({"--out": out_path}, {"--topo-file": from_file})
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
