"""`fabricbench p2p`: copy-bandwidth matrix, GPU to GPU (uni- and bidirectional) and host to/from GPU.

    fabricbench p2p --gpus 0-7 --size 256M --plot p2p.png --out p2p.jsonl

Measured by the compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time,
bidirectional 2 x bytes / time (fabricbench/measuring/copy.py). Records: kind "copy" in the common header.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.types import Count, GpuList, Size
from fabricbench.cli.declared import option
from fabricbench.cli.options import JSON, OUT_FILE, PLOT

from fabricbench.files import refuse_collisions
from fabricbench.measuring.p2p_run import p2p as run_p2p
from fabricbench.measuring.compare import check_plot_path
from fabricbench.measuring.copy_format import plot, render




@click.command()
@click.option("--gpus", type=GpuList(), default=None, help="GPU list: 0-7, 0,2,5. Default: all visible.")
@click.option("--size", type=Size(), default="256M", show_default=True, help="Bytes per copy (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--iters", type=Count(1, 10_000_000), default=20, show_default=True, help="Timed copies per measurement.")
@click.option("--warmup", type=Count(0, 10_000_000), default=5, show_default=True, help="Untimed copies first.")
@click.option("--no-host", is_flag=True, help="Skip host<->GPU copies.")
@click.option("--no-peer", is_flag=True, help="Skip GPU<->GPU copies.")
@option(OUT_FILE, "out_path", help="Append JSONL records (kind 'copy') here.")
@option(JSON, "as_json", help="Print one JSON object instead of tables.")
@option(PLOT, "plot_path", help="Write a heat-map PNG here.")
def p2p(gpus, size, iters, warmup, no_host, no_peer, out_path, as_json, plot_path):
    """Copy bandwidth between every GPU pair and between host and each GPU."""
    check_plot_path(plot_path)  # before anything is measured
    refuse_collisions({"--out": out_path, "--plot": plot_path})
    res = run_p2p(gpus=gpus, size=size, iters=iters, warmup=warmup, host=not no_host, peers=not no_peer,
                  out=out_path)
    if plot_path:
        plot(res, plot_path)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
        return
    render(res, peers=not no_peer, host=not no_host)
