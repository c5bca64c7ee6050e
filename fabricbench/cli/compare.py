"""`fabricbench compare`: the same sweep on several fabrics, each in a fresh process, side by side.

    fabricbench compare --fabrics default,p2p-off --gpus 0,1 --ops all_reduce --sizes 1M-1G:x4 --plot cmp.png
    fabricbench compare --fabrics default,lo:GLOO_SOCKET_IFNAME=lo --engine torch --backend gloo --nprocs 2
    fabricbench compare --fabrics default,shaped:1gbit,shaped:200mbit --engine torch --backend gloo --nprocs 2

Per size: how many times slower each fabric is than the first named = busbw on the first / busbw on the
fabric (algbw when n = 1, where the busbw factor is 0). Records: the common schema, with `fabric` and the transport NCCL really used.
"""

from __future__ import annotations

import json
import sys

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import RESUME, sweep_options
from fabricbench.cli.types import InputPath
from fabricbench.exitcodes import Exit
from fabricbench.files import refuse_collisions
from fabricbench.measuring.child_sweeps import check_plot_path, runs_beside
from fabricbench.measuring.compare_run import CompareConfig, compare as run_compare, default_sweep, plot_comparison
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.format import render_compare

DEFAULT = default_sweep()  # the child sweep the library runs when given none: the options' defaults


@click.command()
@declared_option(CompareConfig, "fabrics")
@declared_option(SweepConfig, "gpus", help="GPU list for every fabric: 0,1 or 0-7.")
@declared_option(SweepConfig, "ops", default=DEFAULT.ops, help="Comma list of collectives.")
@declared_option(SweepConfig, "sizes", default=DEFAULT.sizes)
@declared_option(SweepConfig, "nprocs", help="Local ranks per run (one process each).")
@option(RESUME, "resume", help="Skip fabrics whose every measurement --out already holds as ok.")
@click.option("--with", "with_paths", type=InputPath(), multiple=True,
              help="Show these results beside the fabrics (e.g. `fabricbench import`ed nccl-tests); repeatable.")
@sweep_options
def compare(fabrics, gpus, ops, sizes, nprocs, resume, with_paths, dtype, iters, warmup, engine, backend,
            timeout_s, out_path, plot_path, as_json):
    """Run the same sweep on each fabric and show busbw side by side with the ratio."""
    check_plot_path(plot_path)  # before anything is measured; the plot itself comes after the table
    refuse_collisions({"--out": out_path, "--plot": plot_path}, {f"--with {p}": p for p in with_paths})
    sweep = SweepConfig(gpus=gpus, ops=ops, sizes=sizes, nprocs=nprocs, dtype=dtype, iters=iters, warmup=warmup,
                        engine=engine, backend=backend, timeout_s=timeout_s)
    config = CompareConfig(fabrics=fabrics, sweep=sweep)
    beside = runs_beside(with_paths, ops=list(sweep.ops), dtype=sweep.dtype)  # bad input first
    res = run_compare(config, out=out_path, resume=resume, progress=False if as_json else None, beside=beside)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
    else:
        render_compare(res, say=click.echo)  # the table, the transports, and the published figures beside
    if plot_path:  # after the table: a plot that fails to write costs no printed result
        plot_comparison(res.table, plot_path)
    if res.failed:
        sys.exit(Exit.FAILED)
