"""Click options shared by several commands (compare and scaling pass them on to `fabricbench sweep`).

    fabricbench compare --fabrics default,p2p-off --iters 50 --timeout 60 --plot cmp.png

Only flags live here; fabricbench/measuring/compare.py's SweepOptions holds and checks the values.
"""

from __future__ import annotations

import click


def sweep_options(f):
    """The click options compare and scaling share with `fabricbench sweep`."""
    for opt in reversed([
        click.option("--dtype", default="float32", show_default=True, help="Element type."),
        click.option("--iters", type=int, default=20, show_default=True, help="Timed iterations per size."),
        click.option("--warmup", type=int, default=5, show_default=True, help="Untimed iterations per size."),
        click.option("--engine", default="native", show_default=True, help="native or torch."),
        click.option("--backend", default=None, help="torch engine: nccl or gloo."),
        click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds before a hung step is aborted."),
        click.option("--out", "out_path", default=None, help="Write the combined JSONL records here."),
        click.option("--plot", "plot_path", default=None, help="Write a PNG plot here."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table."),
    ]):
        f = opt(f)
    return f


def echo_err(message: str) -> None:
    click.echo(message, err=True)
