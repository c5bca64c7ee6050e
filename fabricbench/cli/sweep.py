"""`fabricbench sweep`: time collectives over a GPU set and a range of sizes.

    fabricbench sweep --gpus 0-7 --ops all_reduce,all_gather --sizes 8-8G --check --out run.jsonl
    fabricbench sweep --device cpu --nprocs 2 --sizes 1K-1M    (no GPU: --engine torch --backend gloo)
    fabricbench sweep --dry-run                                                  (the expanded plan)
    fabricbench sweep --for-trace prof/ --fabric shaped:2gbit --out sweeps.jsonl  (what a trace needs)

This module only maps flags onto SweepConfig (fabricbench/measuring/config.py, whose fields declare the
options); validation lives in fabricbench/measuring/api.py, the GPUs, the plan and the run with its
outputs in fabricbench/measuring/sweep_run.py, the measuring in fabricbench/measuring/runner.py.
"""

from __future__ import annotations

import sys

import click

from fabricbench.cli import warn
from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import CPU, DRY_RUN, FOR_TRACE, JSON, OUT_FILE, QUIET, RESUME, engine_options
from fabricbench.cli.types import OutputFile
from fabricbench.collectives import listing
from fabricbench.errors import UsageError
from fabricbench.files import refuse_collisions
from fabricbench.measuring import sweep_run
from fabricbench.measuring.config import SweepConfig
from fabricbench.relating import traceplan
from fabricbench.reporting.table import fit_lines


@click.command(context_settings={"show_default": True})
@declared_option(SweepConfig, "gpus")
@declared_option(SweepConfig, "ops")
@declared_option(SweepConfig, "sizes")
@declared_option(SweepConfig, "dtype")
@declared_option(SweepConfig, "iters")
@declared_option(SweepConfig, "warmup")
@declared_option(SweepConfig, "adaptive")
@declared_option(SweepConfig, "max_iters")
@declared_option(SweepConfig, "inplace")
@declared_option(SweepConfig, "graph")
@declared_option(SweepConfig, "graph_iters")
@declared_option(SweepConfig, "check")
@engine_options
@declared_option(SweepConfig, "nprocs")
@declared_option(SweepConfig, "timeout_s")
@declared_option(SweepConfig, "stall_timeout_s")
@declared_option(SweepConfig, "nccl_lib")
@declared_option(SweepConfig, "fabric")
@declared_option(SweepConfig, "seed")
@declared_option(SweepConfig, "buffers")
@declared_option(SweepConfig, "timing")
@declared_option(SweepConfig, "alloc")
@declared_option(SweepConfig, "gap_s")
@option(OUT_FILE, "out_path", help="Append JSONL records here, one per measurement.")
@option(RESUME, "resume",
        help="Skip what --out already holds as ok (same op, size, dtype, ranks, GPUs, engine, fabric, settings).")
@option(JSON, "as_json", help="Print records as JSON lines instead of the table.")
@click.option("--csv", "csv_path", type=OutputFile(), default=None, help="Also write a CSV of the results here.")
@option(DRY_RUN, "dry_run", help="Print the expanded plan and exit.")
@option(QUIET, "quiet", help="No table (records still go to --out).")
@click.option("--list-ops", is_flag=True, help="List the collectives and exit.")
@option(FOR_TRACE, "for_trace", multiple=True, default=())
def sweep(gpus, ops, sizes, dtype, iters, warmup, adaptive, max_iters, inplace, graph, graph_iters, check, engine,
          backend, nprocs, timeout_s, nccl_lib, fabric, seed, buffers, timing, alloc, out_path, resume, as_json,
          csv_path, dry_run, quiet, list_ops, gap_s=0.0, stall_timeout_s=None, for_trace=()):
    """Time NCCL collectives over a GPU set and a range of sizes (nccl-tests' algbw and busbw)."""
    if list_ops:
        for line in fit_lines(listing()):
            click.echo(line)
        return
    config = SweepConfig(
        gpus=gpus, ops=ops, sizes=sizes, dtype=dtype, iters=iters, warmup=warmup, adaptive=adaptive,
        max_iters=max_iters, inplace=inplace, graph=graph, graph_iters=graph_iters, check=check, engine=engine,
        backend=backend, nprocs=nprocs, timeout_s=timeout_s, nccl_lib=nccl_lib, fabric=fabric, seed=seed,
        buffers=buffers, timing=timing, alloc=alloc, gap_s=gap_s, stall_timeout_s=stall_timeout_s)
    refuse_collisions({"--out": out_path, "--csv": csv_path}, {"--nccl-lib": nccl_lib})
    if resume and not out_path:
        raise UsageError("--resume skips what --out already holds; give --out FILE (the earlier run's file)")
    configs = [config]
    if for_trace:
        configs = _for_trace(list(for_trace), config, gpus)
        if csv_path and len(configs) > 1 and not dry_run:
            raise UsageError(f"--csv holds one sweep's rows and the trace needs {len(configs)} (one per dtype and "
                             f"group size); keep --out FILE, which holds them all")
    for config in configs:
        if dry_run:  # a plan needs no GPU here: named GPUs as named, else this machine's, else one GPU
            config, notes = sweep_run.plan_devices(config, gpus)
            for note in notes:
                click.echo(f"note: {note}", err=True)
            sweep_run.print_plan(config)
            continue
        config, notes = sweep_run.devices(config, gpus)
        for note in notes:
            warn(note)
        sweep_run.run(config, out_path=out_path, as_json=as_json, csv_path=csv_path, quiet=quiet, resume=resume,
                      echo=click.echo, warn=warn, note=lambda text: click.echo(text, err=True))


def _for_trace(paths: list[str], config: SweepConfig, gpus: str | None) -> list[SweepConfig]:
    """The sweeps the traces need (relating/traceplan.py); what the trace decides may not be named too."""
    ctx = click.get_current_context()
    given = [f"--{name.replace('_', '-')}" for name in ("ops", "sizes", "dtype", "nprocs")
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
    if given:
        raise UsageError(f"--for-trace sweeps the trace's own ops, sizes, dtypes and ranks; drop {', '.join(given)}")
    named = ctx.get_parameter_source("backend") == click.core.ParameterSource.COMMANDLINE or bool(ctx.meta.get(CPU))
    configs, job = traceplan.configs(paths, config, backend_named=named, gpus_named=gpus is not None,
                                     cpu=bool(ctx.meta.get(CPU)))
    click.echo(f"for-trace: {job.label}: {job.world_size} ranks, {job.backend} on {job.device}; "
               f"{len(configs)} sweep(s): " + "; ".join(f"{', '.join(c.ops)} in {c.dtype} at {c.sizes}"
                                                     + (f" after a {c.gap_s * 1e3:.3g} ms idle gap" if c.gap_s else "")
                                                     for c in configs),
               err=True)
    return configs


if __name__ == "__main__":  # pragma: no cover
    sys.exit(sweep())
