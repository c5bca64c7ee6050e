"""Click options shared by several commands (compare and scaling pass them on to `fabricbench sweep`).

    fabricbench compare --fabrics default,p2p-off --iters 50 --timeout 60 --plot cmp.png

Only flags live here; fabricbench/measuring/compare.py's SweepOptions holds and checks the values.
"""

from __future__ import annotations

import click

from fabricbench.cli.declared import declared_option
from fabricbench.cli.types import OutputFile
from fabricbench.measuring.config import SweepConfig


def sweep_options(f):
    """The click options compare and scaling share with `fabricbench sweep`."""
    for opt in reversed([
        declared_option(SweepConfig, "dtype"),
        declared_option(SweepConfig, "iters"),
        declared_option(SweepConfig, "warmup"),
        declared_option(SweepConfig, "engine"),
        declared_option(SweepConfig, "backend"),
        declared_option(SweepConfig, "timeout_s"),
        click.option("--out", "out_path", type=OutputFile(), default=None, help="Write the combined JSONL records here."),
        click.option("--plot", "plot_path", type=OutputFile(), default=None, help="Write a PNG plot here."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table."),
    ]):
        f = opt(f)
    return f

