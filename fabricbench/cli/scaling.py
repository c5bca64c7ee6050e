"""`fabricbench scaling`: busbw against GPU count, with GPU sets chosen from the topology.

    fabricbench scaling --gpus 0-7 --counts 2,4,8 --ops all_reduce --sizes 1G --plot scaling.png
    fabricbench scaling --topo-file box.txt --engine torch --backend gloo --counts 2,4   (CPU ranks)

For each count: a set inside one NVLink island where one is large enough, and a set across islands
where there are several (labels "intra-island" / "cross-island"; "uniform" on NVSwitch); see
fabricbench/topology/placement.py. Each set runs in its own `fabricbench sweep` process.
"""

from __future__ import annotations

import json
import sys

import click

from fabricbench.cli.types import OP_REGISTRY, CountList, FabricSpec, GpuList, InputPath, NameList, SizeList

from fabricbench.cli.options import sweep_options
from fabricbench.files import refuse_collisions
from fabricbench.measuring.commands import scaling as run_scaling
from fabricbench.measuring.compare import check_plot_path
from fabricbench.measuring.format import plot_scaling, render_scaling


@click.command()
@click.option("--gpus", type=GpuList(), default=None, help="GPUs to draw the sets from (CUDA ordinals). Default: all.")
@click.option("--counts", type=CountList(2, 1024), default=None, help="GPU counts: 2,4,8. Default: powers of 2 up to all GPUs.")
@click.option("--ops", type=NameList(OP_REGISTRY, "collective"), default="all_reduce", show_default=True, help="Comma list of collectives.")
@click.option("--sizes", type=SizeList(), default="1G", show_default=True, help="Sizes: 1G, 64M-1G:x4 or 64K,1M (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--fabric", "fabric_spec", type=FabricSpec(), default="default", show_default=True, help="Fabric for every set (see `fabricbench fabrics`; shaped:RATE too).")
@click.option("--topo-file", type=InputPath(), default=None, help="Choose sets from a saved `nvidia-smi topo -m` output.")
@click.option("--resume", is_flag=True, help="Skip GPU sets whose every measurement --out already holds as ok.")
@sweep_options
def scaling(gpus, counts, ops, sizes, fabric_spec, topo_file, resume, dtype, iters, warmup, engine, backend,
            timeout_s, out_path, plot_path, as_json):
    """Bus bandwidth against GPU count, inside one NVLink island and across islands."""
    check_plot_path(plot_path)  # before anything is measured; the plot itself comes after the table
    refuse_collisions({"--out": out_path, "--plot": plot_path}, {"--topo-file": topo_file})
    res = run_scaling(gpus=gpus, counts=counts, fabric=fabric_spec, topo_file=topo_file, out=out_path, resume=resume,
                      progress=False if as_json else None, ops=ops, sizes=sizes, dtype=dtype, iters=iters,
                      warmup=warmup, engine=engine, backend=backend, timeout_s=timeout_s)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
    else:
        render_scaling(res.rows, res.topology, cpu=res.cpu_ranks)
    if plot_path:  # after the table: a plot that fails to write costs no printed result
        plot_scaling(res.rows, plot_path)
    if res.failed:
        sys.exit(1)
