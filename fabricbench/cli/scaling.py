"""`fabricbench scaling`: busbw against GPU count, with GPU sets chosen from the topology.

    fabricbench scaling --gpus 0-7 --num-gpus 2,4,8 --ops all_reduce --sizes 1G --plot scaling.png
    fabricbench scaling --topo-file box.txt --engine torch --backend gloo --num-gpus 2,4   (CPU ranks)

For each count: a set inside one NVLink island where one is large enough, and a set across islands
where there are several (labels "intra-island" / "cross-island"; "uniform" on NVSwitch); see
fabricbench/topology/placement.py. Each set runs in its own `fabricbench sweep` process.
"""

from __future__ import annotations

import json
import sys

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import RESUME, sweep_options
from fabricbench.exitcodes import Exit
from fabricbench.files import refuse_collisions
from fabricbench.measuring.child_sweeps import check_plot_path
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.format import plot_scaling, render_scaling
from fabricbench.measuring.scaling_run import ScalingConfig, default_sweep, scaling as run_scaling

DEFAULT = default_sweep()  # the child sweep the library runs when given none: the options' defaults


@click.command()
@declared_option(SweepConfig, "gpus", help="GPUs to draw the sets from (CUDA ordinals).")
@declared_option(ScalingConfig, "counts")
@declared_option(SweepConfig, "ops", default=DEFAULT.ops)
@declared_option(SweepConfig, "sizes", default=DEFAULT.sizes)
@declared_option(SweepConfig, "fabric", help="Fabric for every set (see `fabricbench fabrics`; shaped:RATE too).")
@declared_option(ScalingConfig, "topo_file")
@option(RESUME, "resume", help="Skip GPU sets whose every measurement --out already holds as ok.")
@sweep_options
def scaling(gpus, counts, ops, sizes, fabric, topo_file, resume, dtype, iters, warmup, engine, backend,
            timeout_s, out_path, plot_path, as_json):
    """Bus bandwidth against GPU count, inside one NVLink island and across islands."""
    check_plot_path(plot_path)  # before anything is measured; the plot itself comes after the table
    refuse_collisions({"--out": out_path, "--plot": plot_path}, {"--topo-file": topo_file})
    sweep = SweepConfig(gpus=gpus, ops=ops, sizes=sizes, fabric=fabric, dtype=dtype, iters=iters, warmup=warmup,
                        engine=engine, backend=backend, timeout_s=timeout_s)
    res = run_scaling(ScalingConfig(counts=counts, topo_file=topo_file, sweep=sweep), out=out_path, resume=resume,
                      progress=False if as_json else None)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
    else:
        render_scaling(res.rows, res.topology, cpu=res.cpu_ranks)
    if plot_path:  # after the table: a plot that fails to write costs no printed result
        plot_scaling(res.rows, plot_path)
    if res.failed:
        sys.exit(Exit.FAILED)
