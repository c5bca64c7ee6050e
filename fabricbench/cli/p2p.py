"""`fabricbench p2p`: copy-bandwidth matrix, GPU to GPU (uni- and bidirectional) and host to/from GPU.

    fabricbench p2p --gpus 0-7 --size 256M --plot p2p.png --out p2p.jsonl

Measured by the compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time,
bidirectional 2 x bytes / time (fabricbench/measuring/copy.py). Records: kind "copy" in the common header.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.types import Count, GpuList, OutputFile, Size

from fabricbench.files import refuse_collisions
from fabricbench.measuring.commands import p2p as run_p2p
from fabricbench.measuring.compare import check_plot_path
from fabricbench.report import table as tables
from fabricbench.report.analysis import fmt
from fabricbench.report.plot import HeatPanel, heatmaps
from fabricbench.sizes import format_size




@click.command()
@click.option("--gpus", type=GpuList(), default=None, help="GPU list: 0-7, 0,2,5. Default: all visible.")
@click.option("--size", type=Size(), default="256M", show_default=True, help="Bytes per copy (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--iters", type=Count(1, 10_000_000), default=20, show_default=True, help="Timed copies per measurement.")
@click.option("--warmup", type=Count(0, 10_000_000), default=5, show_default=True, help="Untimed copies first.")
@click.option("--no-host", is_flag=True, help="Skip host<->GPU copies.")
@click.option("--no-peer", is_flag=True, help="Skip GPU<->GPU copies.")
@click.option("--out", "out_path", type=OutputFile(), default=None, help="Append JSONL records (kind 'copy') here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--plot", "plot_path", type=OutputFile(), default=None, help="Write a heat-map PNG here.")
def p2p(gpus, size, iters, warmup, no_host, no_peer, out_path, as_json, plot_path):
    """Copy bandwidth between every GPU pair and between host and each GPU."""
    check_plot_path(plot_path)  # before anything is measured
    refuse_collisions({"--out": out_path, "--plot": plot_path})
    res = run_p2p(gpus=gpus, size=size, iters=iters, warmup=warmup, host=not no_host, peers=not no_peer,
                  out=out_path)
    uni, bi, host = res.unidirectional_gbps, res.bidirectional_gbps, res.host_results
    if plot_path:
        plot(res.gpus, uni, bi, host, res.bytes, plot_path)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
        return
    render(res.gpus, uni, bi, host, res.bytes, no_peer, no_host)


def plot(gpu_t, uni, bi, host, nbytes, path: str) -> None:
    """Heat maps of what was measured: GPU to GPU (one way; both ways when there are two GPUs or more) and
    host to/from each GPU. Panels with nothing measured are left out."""
    labels = [f"GPU{g}" for g in gpu_t]
    panels = [HeatPanel("GPU to GPU, one way (GB/s)" + ("; diagonal: within one GPU" if len(gpu_t) > 1 else
                                                        ": within one GPU"), uni, labels, labels)]
    if len(gpu_t) > 1:  # a pair is needed to copy both ways at once
        panels.append(HeatPanel("GPU to GPU, both ways at once (GB/s, sum)", bi, labels, labels))
    if host:
        directions = ("h2d", "d2h", "bidir")
        hm = [[_host(host, g, d) for d in directions] for g in gpu_t]
        panels.append(HeatPanel("host and GPU, pinned (GB/s)", hm, labels,
                                ["host→GPU", "GPU→host", "both (sum)"], ylabel="GPU", xlabel="direction"))
    heatmaps(panels, path, title=f"copy bandwidth, {format_size(nbytes)} per copy, median of the timed copies")


def _host(host, g: int, direction: str):
    return next((r.gbps for r in host if r.direction == direction and f"GPU{g}" in (r.src, r.dst)), None)


def render(gpu_t, uni, bi, host, nbytes, no_peer, no_host) -> None:
    console = tables.console()
    labels = [f"GPU{g}" for g in gpu_t]
    if not no_peer:
        # The bidirectional matrix says nothing new with one GPU (only the copy inside it): not printed.
        for name, m in (("unidirectional", uni), ("bidirectional", bi))[:1 if len(gpu_t) < 2 else 2]:
            cols = [tables.Col("src\\dst", justify="left", key=True)] + [tables.Col(lab) for lab in labels]
            tables.render(console, f"GPU->GPU {name} copy GB/s ({format_size(nbytes)}; rows src, columns dst; "
                                   f"diagonal: inside one GPU)",
                          cols, [[lab, *["-" if v is None else fmt(v, 1) for v in row]] for lab, row in zip(labels, m)])
    if not no_host:
        cols = [tables.Col("GPU", key=True)] + [tables.Col(c) for c in ("h2d", "d2h", "bidir")]
        tables.render(console, f"host<->GPU copy GB/s ({format_size(nbytes)}, pinned host memory)", cols,
                      [[f"GPU{g}", *[fmt(_host(host, g, d), 1) for d in ("h2d", "d2h", "bidir")]] for g in gpu_t])
