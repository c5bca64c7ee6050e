"""`fabricbench train`: DDP, ZeRO-1/2/3 and FSDP on the same model and batch, one record per strategy.

    fabricbench train --strategies all --model dinov2-base --gpus 0-3 --steps 8 --warmup-steps 3 --out t.jsonl
    fabricbench train --strategies zero2 --model tiny-mistral --device cpu --nprocs 2
    fabricbench train --list

This layer only maps flags to fabricbench.train (fabricbench/training/api.py); TrainConfig checks them when
built.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON, OUT_FILE, QUIET

from fabricbench.errors import FabricbenchError
from fabricbench.files import refuse_collisions
from fabricbench.training.api import train as run_train
from fabricbench.training.format import line, listing, phase_lines, render
from fabricbench.training.phases import process_start
from fabricbench.training.launch import TrainConfig
from fabricbench.training.models import MODELS
from fabricbench.training.strategies import STRATEGIES
from fabricbench.reporting.table import fit_lines


@click.command()
@declared_option(TrainConfig, "strategies", required=False)
@declared_option(TrainConfig, "model")
@declared_option(TrainConfig, "model_config")
@declared_option(TrainConfig, "model_path")
@declared_option(TrainConfig, "gpus")
@declared_option(TrainConfig, "device")
@declared_option(TrainConfig, "nprocs")
@declared_option(TrainConfig, "backend")
@declared_option(TrainConfig, "steps")
@declared_option(TrainConfig, "max_steps")
@declared_option(TrainConfig, "target_ci")
@declared_option(TrainConfig, "repeats")
@declared_option(TrainConfig, "max_repeats")
@declared_option(TrainConfig, "time_budget_s")
@declared_option(TrainConfig, "margin")
@declared_option(TrainConfig, "warmup_steps")
@declared_option(TrainConfig, "batch_size")
@declared_option(TrainConfig, "seq_len")
@declared_option(TrainConfig, "image_size")
@declared_option(TrainConfig, "lr")
@declared_option(TrainConfig, "precision")
@declared_option(TrainConfig, "trace_steps")
@declared_option(TrainConfig, "dataset")
@declared_option(TrainConfig, "fabric")
@option(OUT_FILE, "out", help="Append records to this JSONL.")
@declared_option(TrainConfig, "nnodes")
@declared_option(TrainConfig, "node_rank")
@declared_option(TrainConfig, "master_addr")
@declared_option(TrainConfig, "master_port")
@declared_option(TrainConfig, "timeout_s")
@declared_option(TrainConfig, "stall_timeout_s")
@option(JSON, "as_json", help="Print each record as JSON instead of a line.")
@click.option("--list", "list_", is_flag=True, help="List strategies and models, then exit.")
@option(QUIET, "quiet", help="No line per run, no table and no progress (records still go to --out).")
@click.option("--verbose", is_flag=True, help="Under each run, its wall time phase by phase: launch, imports, "
              "init, model build, wrap, first step, warm-up, timed steps, trace, teardown.")
def train(strategies, model, model_config, model_path, gpus, device, nprocs, backend, steps, max_steps, target_ci,
          repeats, max_repeats, time_budget_s, margin, warmup_steps, batch_size, seq_len, image_size, lr, precision,
          trace_steps, dataset, fabric, out, nnodes, node_rank, master_addr, master_port, timeout_s, as_json,
          list_, quiet=False, stall_timeout_s=None, verbose=False) -> None:
    """Train one model under each strategy, in fresh processes, and measure throughput and memory."""
    if list_:
        for text in fit_lines(listing(STRATEGIES, MODELS)):
            click.echo(text)
        return
    if device == "cuda" and nprocs is not None and backend != "gloo":
        click.echo("warning: --nprocs is ignored with --device cuda and nccl (one process per --gpus entry; "
                   "--backend gloo runs several ranks per GPU)", err=True)
        nprocs = None
    elif device == "cpu" and gpus:
        click.echo("warning: --gpus is ignored with --device cpu (use --nprocs)", err=True)
    refuse_collisions({"--out": out}, {"--model-config": model_config, "--dataset": dataset})
    # a run's line (a failed one carries its message) wraps at words to the output's width
    echo = (lambda r: click.echo(json.dumps(r))) if as_json else (lambda r: click.echo("\n".join(fit_lines([line(r)]))))
    if verbose and not as_json:
        echo = lambda r: click.echo("\n".join([*fit_lines([line(r)]), *phase_lines(r)]))  # noqa: E731
    if quiet and not as_json:
        echo = lambda r: None  # noqa: E731
    config = TrainConfig(  # checked when built; the library places it (GPUs, "all", Slurm's nodes)
        strategies=strategies or "all", device=device, gpus=gpus if device == "cuda" and gpus else (), model=model,
        model_config=model_config, model_path=model_path, nprocs=nprocs, steps=steps, warmup_steps=warmup_steps,
        batch_size=batch_size, seq_len=seq_len, image_size=image_size, lr=lr, precision=precision,
        trace_steps=trace_steps, dataset=dataset, fabric=fabric, nnodes=nnodes, node_rank=node_rank,
        master_addr=master_addr, master_port=master_port, timeout_s=timeout_s, stall_timeout_s=stall_timeout_s,
        backend=backend, max_steps=max_steps, target_ci=target_ci or None, repeats=repeats, max_repeats=max_repeats,
        time_budget_s=time_budget_s, margin=margin)
    res = run_train(config, out=out, echo=echo, quiet=as_json or quiet,
                    since=process_start())  # the user's wait began with this process
    if not (as_json or quiet) and res.records:
        render(res.to_dict(), f"train: {model or model_config or model_path}, {device}", say=click.echo,
               repeats=repeats, max_repeats=max_repeats, margin=margin)
    # exit 1 when a run failed (a dead rank, a crash, a timeout, a strategy that did not run as asked),
    # though every record (and a dead rank's measured steps) was written; oom and waived are results.
    if res.failed:
        raise FabricbenchError("; ".join(f"{r.strategy}: {str(r.message)[:300]}" for r in res.failed)
                               + (f" (records written to {out})" if out else ""))
