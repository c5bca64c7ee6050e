"""`fabricbench topo`: GPU links, NVLink islands and placement advice.

    fabricbench topo                              (NVML; `nvidia-smi topo -m` if NVML fails)
    fabricbench topo --gpus 0-3 --json
    fabricbench topo --topo-file saved-topo-m.txt (an output saved on another machine; once --from-file)

This layer only maps flags to fabricbench.topo (fabricbench/measuring/topo_run.py), whose config declares
every option, and prints what it returns.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import config_options, option
from fabricbench.cli.options import JSON
from fabricbench.measuring.topo_run import TopoConfig
from fabricbench.measuring.topo_run import topo as topo_call
from fabricbench.topology.format import render


@click.command()
@config_options(TopoConfig, only=("gpus",))
@option(JSON, "as_json", help="Print the topology as one JSON object.")
@config_options(TopoConfig, only=("topo_file", "out"))
def topo(as_json, **fields):
    """Show GPU links, NVLink islands, and which GPU sets stay on NVLink."""
    result = topo_call(TopoConfig(**fields))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    render(result.topology, result.advice)
