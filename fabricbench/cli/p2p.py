"""`fabricbench p2p`: copy-bandwidth matrix, GPU to GPU (uni- and bidirectional) and host to/from GPU.

    fabricbench p2p --gpus 0-7 --size 256M --plot p2p.png --out p2p.jsonl

Measured by the compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time,
bidirectional 2 x bytes / time (fabricbench/measuring/copy.py). Records: kind "copy" in the common header.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import config_options, option
from fabricbench.cli.options import JSON, OUT_FILE, PLOT
from fabricbench.files import refuse_collisions
from fabricbench.measuring.child_sweeps import check_plot_path
from fabricbench.measuring.copy_format import plot, render
from fabricbench.measuring.p2p_run import P2PConfig, p2p as run_p2p


@click.command()
@config_options(P2PConfig)
@option(OUT_FILE, "out_path", help="Append JSONL records (kind 'copy') here.")
@option(JSON, "as_json", help="Print one JSON object instead of tables.")
@option(PLOT, "plot_path", help="Write a heat-map PNG here.")
def p2p(out_path, as_json, plot_path, **fields):
    """Copy bandwidth between every GPU pair and between host and each GPU."""
    check_plot_path(plot_path)  # before anything is measured
    refuse_collisions({"--out": out_path, "--plot": plot_path})
    config = P2PConfig(**fields)
    res = run_p2p(config, out=out_path)
    if plot_path:
        plot(res, plot_path)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
        return
    render(res, peers=not config.no_peer, host=not config.no_host)
