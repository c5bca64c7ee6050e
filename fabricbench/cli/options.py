"""The options that belong to no config but mean one thing in every command that offers them (--json,
--out, --plot, --resume, --dry-run, --quiet), declared once here as config fields are
(fabricbench/declare.py), and the click options compare and scaling share with `sweep`. --topo-file is
declared beside its reader (fabricbench/topology/), since TopoConfig's field takes it too; --num-gpus
(scaling's list of counts) by ScalingConfig's field (measuring/scaling_run.py).

    fabricbench compare --fabrics default,p2p-off --iters 50 --timeout 60 --plot cmp.png

A command takes one with `option(JSON, "as_json", help=...)`: its flag, kind, range and aliases come
from here, its words may say what it does in that command. Only flags live here; the values are held
and checked by the library (the configs: compare's and scaling's child sweep is a SweepConfig).
"""

from __future__ import annotations

from typing import Any, Callable

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.declare import Declared
from fabricbench.measuring.config import SweepConfig
from fabricbench.topology import TOPO_FILE  # noqa: F401 (a saved topology: declared beside its reader)
from fabricbench.training.config import TrainConfig

JSON = Declared(flag="--json", kind="flag", help="Print one JSON object instead of the table.")
OUT_FILE = Declared(flag="--out", kind="output file", help="Append the JSONL records here.")
PLOT = Declared(flag="--plot", kind="output file", help="Write a PNG plot here.")
RESUME = Declared(flag="--resume", kind="flag", help="Skip what --out already holds as ok.")
DRY_RUN = Declared(flag="--dry-run", kind="flag", help="Print the plan and exit; run nothing.")
QUIET = Declared(flag="--quiet", kind="flag", help="No table or progress (records still go to --out).")
FOR_TRACE = Declared(flag="--for-trace", kind="input file or folder", help=(
    "Sweep exactly what this torch.profiler trace needs (its ops, dtypes, sizes, ranks, backend and device): "
    "a file or a folder of them; repeat for several."))


CPU_MODE = {"engine": "torch", "backend": "gloo"}  # what --device cpu means to a measuring command
CPU = "fabricbench.device_cpu"  # ctx.meta key: --device cpu was given (read by --engine and --backend)


def engine_options(f: Callable) -> Callable:
    """--engine, --backend and --device, as every measuring command takes them. CPU mode has one name in
    every command (train's and study's --device cpu); here `cpu` is the torch engine over gloo. --engine
    torch --backend gloo stay, since torch over nccl is a GPU mode; a value that says otherwise beside
    --device cpu is refused. --device is eager, so it is read before the two whatever their order."""

    def device(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.meta[CPU] = value == "cpu"

    def keeps_cpu(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if not ctx.meta.get(CPU):
            return value
        given = ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE
        if given and value != CPU_MODE[param.name]:
            raise click.BadParameter(f"{value} beside --device cpu, which runs --engine torch --backend gloo; "
                                     "drop one of them", ctx=ctx, param=param)
        return CPU_MODE[param.name]

    for opt in reversed([
        declared_option(SweepConfig, "engine", callback=keeps_cpu),
        declared_option(SweepConfig, "backend", callback=keeps_cpu),
        declared_option(TrainConfig, "device", expose_value=False, is_eager=True, callback=device, help=(
            "cpu: CPU ranks (--engine torch --backend gloo); cuda: GPUs, by --engine.")),
    ]):
        f = opt(f)
    return f


def sweep_options(f):
    """The click options compare and scaling share with `fabricbench sweep`."""
    for opt in reversed([
        declared_option(SweepConfig, "dtype"),
        declared_option(SweepConfig, "iters"),
        declared_option(SweepConfig, "warmup"),
        engine_options,
        declared_option(SweepConfig, "timeout_s"),
        option(OUT_FILE, "out_path", help="Write the combined JSONL records here."),
        option(PLOT, "plot_path"),
        option(JSON, "as_json"),
    ]):
        f = opt(f)
    return f

