"""What `fabricbench p2p` shows: the copy-bandwidth matrices and the host table on the console, and the
heat-map plot (library code; the CLI only maps flags).

    fabricbench p2p --gpus 0-7 --size 256M --plot p2p.png
"""

from __future__ import annotations

from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import fmt
from fabricbench.reporting.plot import HeatPanel, heatmaps
from fabricbench.sizes import format_size


def plot(res, path: str) -> None:
    """Heat maps of what was measured (a measuring.p2p_run result): GPU to GPU (one way; both ways when
    there are two GPUs or more) and host to/from each GPU. Panels with nothing measured are left out."""
    gpu_t, uni, bi, host, nbytes = res.gpus, res.unidirectional_gbps, res.bidirectional_gbps, res.host_results, \
        res.bytes
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


def render(res, *, peers: bool = True, host: bool = True) -> None:
    """The GPU-to-GPU matrices (`peers`) and the host table (`host`) of a p2p result, on the console."""
    gpu_t, uni, bi, nbytes = res.gpus, res.unidirectional_gbps, res.bidirectional_gbps, res.bytes
    no_peer, no_host, host = not peers, not host, res.host_results
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
