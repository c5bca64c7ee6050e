"""`fabricbench train`: DDP, ZeRO-1/2/3 and FSDP on the same model and batch, one record per strategy.

    fabricbench train --strategy all --model dinov2-base --gpus 0-3 --steps 8 --warmup-steps 3 --out t.jsonl
    fabricbench train --strategy zero2 --model tiny-mistral --device cpu --nprocs 2
    fabricbench train --list

This layer only maps flags to fabricbench.train (fabricbench/training/api.py); TrainConfig validates them.
"""

from __future__ import annotations

import json
import os

import click

from fabricbench.cluster import env as cluster_env
from fabricbench.errors import FabricbenchError
from fabricbench.files import refuse_collisions
from fabricbench.report import table as tables
from fabricbench.report.analysis import fmt
from fabricbench.results.status import Status
from fabricbench.training import repeats as reps
from fabricbench.training.api import train as run_train
from fabricbench.training.models import MODELS
from fabricbench.training.strategies import STRATEGIES


def _gib(v: object) -> str:
    return f"{v / 2**30:.2f}" if isinstance(v, (int, float)) else "-"


TRAIN_COLS = (tables.Col("strategy", justify="left", key=True), tables.Col("run", key=True),
              tables.Col("status", justify="left"), tables.Col("samples/s"),
              tables.Col("median CI", "ci", "ci = the median step's 95% CI inside the run, ±"),
              tables.Col("peak alloc GiB", "alloc", "alloc/resv/est = peak allocated/reserved/estimated memory, GiB"),
              tables.Col("reserved GiB", "resv"), tables.Col("estimate GiB", "est"),
              tables.Col("note", justify="left", prose=True))


def _cells(rec: dict) -> list[str]:
    thr = rec.get("throughput") or {}
    mem = rec.get("memory") or {}
    sps = thr.get("samples_per_s")
    ci = (rec.get("step_time") or {}).get("ci95_rel")
    note = "; ".join(x for x in (rec.get("message"), rec.get("host_bound")) if x)
    return [rec["strategy"], str(rec.get("repeat") or 1), rec["status"], fmt(sps) if sps else "-",
            f"±{ci:.1%}" if sps and isinstance(ci, (int, float)) else "-", _gib(mem.get("max_allocated_bytes")),
            _gib(mem.get("max_reserved_bytes")), _gib((rec.get("estimate") or {}).get("with_activations_bytes")), note]


def _line(rec: dict) -> str:
    """One short line per run as it finishes (the table and the figures with their intervals follow)."""
    c = _cells(rec)
    return f"{c[0]} run {c[1]}: {c[2]}" + (f", {c[3]} samples/s {c[4]}" if c[3] != "-" else "") + \
        (f" ({c[8]})" if c[8] else "")


@click.command()
@click.option("--strategy", "strategy", default="all", show_default=True,
              help="ddp, zero1, zero2, zero3, fsdp, a comma list of them, or all.")
@click.option("--model", default=None, help="A model name (see --list).")
@click.option("--model-config", type=click.Path(dir_okay=False), default=None,
              help="A transformers config JSON; random weights.")
@click.option("--model-path", type=click.Path(file_okay=False), default=None, help="Local pretrained weights.")
@click.option("--gpus", default=None, help="GPU list, one process each, e.g. 0-3 (default: all visible).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--nprocs", type=int, default=2, show_default=True,
              help="Processes with --device cpu; with --device cuda --backend gloo, ranks over --gpus (several per GPU).")
@click.option("--backend", type=click.Choice(["nccl", "gloo"]), default=None,
              help="Collective backend (default: nccl on cuda, gloo on cpu); gloo on cuda for several ranks per GPU.")
@click.option("--steps", type=int, default=8, show_default=True, help="Steps at least, warm-up included.")
@click.option("--max-steps", type=int, default=None,
              help="Cap on steps while the median's CI exceeds --target-ci (default: max(--steps, 40)).")
@click.option("--target-ci", type=float, default=0.03, show_default=True,
              help="Step on, and repeat, until the median's 95% CI is within this fraction (0: off).")
@click.option("--repeats", type=int, default=None,
              help="Runs of each strategy in fresh processes (default: 3, then more until --target-ci).")
@click.option("--max-repeats", type=int, default=6, show_default=True, help="Cap on runs per strategy.")
@click.option("--time-budget", "time_budget_s", type=float, default=1800.0, show_default=True,
              help="Seconds after which no repeat beyond the minimum starts.")
@click.option("--warmup-steps", type=int, default=3, show_default=True, help="Untimed first steps.")
@click.option("--batch-size", type=int, default=8, show_default=True, help="Samples per GPU per step.")
@click.option("--seq-len", type=int, default=512, show_default=True, help="Tokens per sample (causal LM).")
@click.option("--image-size", type=int, default=224, show_default=True, help="Pixels per side (images).")
@click.option("--lr", type=float, default=1e-4, show_default=True, help="AdamW learning rate.")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]), default=None,
              help="Compute precision (default: bf16 on cuda, fp32 on cpu).")
@click.option("--trace-steps", type=int, default=2, show_default=True,
              help="Profiled steps after the timed ones, for the communication trace (0: none).")
@click.option("--dataset", type=click.Path(exists=True), default=None,
              help="Local data: DIR/<class>/<image>, or *.txt / *.npy tokens. Default: synthetic.")
@click.option("--fabric", default="default", show_default=True, help="The NCCL environment to run under.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Append records to this JSONL.")
@click.option("--nnodes", type=int, default=1, show_default=True, help="torchrun pass-through.")
@click.option("--node-rank", type=int, default=0, show_default=True, help="torchrun pass-through.")
@click.option("--master-addr", default="127.0.0.1", show_default=True, help="torchrun pass-through.")
@click.option("--master-port", type=int, default=None, help="torchrun pass-through (default: a free port).")
@click.option("--timeout", "timeout_s", type=float, default=1800.0, show_default=True,
              help="Seconds a rank may go without progress (a step; start-up gets at least 10 min) before "
                   "the run ends naming it.")
@click.option("--stall-timeout", "stall_timeout_s", type=float, default=None,
              help="Seconds a rank's heartbeat (or every rank's step) may stop before the run ends naming the "
                   "rank and its host, on every node [default: max(60, 10x the median step)].")
@click.option("--json", "as_json", is_flag=True, help="Print each record as JSON instead of a line.")
@click.option("--list", "list_", is_flag=True, help="List strategies and models, then exit.")
def train(strategy, model, model_config, model_path, gpus, device, nprocs, backend, steps, max_steps, target_ci,
          repeats, max_repeats, time_budget_s, warmup_steps, batch_size, seq_len, image_size, lr, precision,
          trace_steps, dataset, fabric, out, nnodes, node_rank, master_addr, master_port, timeout_s, as_json,
          list_, stall_timeout_s=None) -> None:
    """Train one model under each strategy, in fresh processes, and measure throughput and memory."""
    if list_:
        for s in STRATEGIES:
            why = s.unavailable()
            click.echo(f"strategy {s.name:<6} {s.description}" + (f"  [{why}]" if why else ""))
        for m in MODELS:
            click.echo(f"model    {m.name:<13} {m.task:<9} {m.description}")
        return
    ctx = click.get_current_context()
    nprocs_given = ctx.get_parameter_source("nprocs").name != "DEFAULT"
    slurm = cluster_env.slurm_nodes(os.environ)  # srun, one task per node: the nodes from Slurm
    if slurm is not None and ctx.get_parameter_source("nnodes").name == "DEFAULT":
        nnodes, node_rank, master_addr, master_port = slurm
    if device == "cuda" and not nprocs_given:
        nprocs = 1  # one rank per GPU named
    elif device == "cuda" and backend != "gloo":
        click.echo("warning: --nprocs is ignored with --device cuda and nccl (one process per --gpus entry; "
                   "--backend gloo runs several ranks per GPU)", err=True)
        nprocs = 1
    elif device == "cpu" and gpus:
        click.echo("warning: --gpus is ignored with --device cpu (use --nprocs)", err=True)
    refuse_collisions({"--out": out}, {"--model-config": model_config, "--dataset": dataset})
    echo = (lambda r: click.echo(json.dumps(r))) if as_json else (lambda r: click.echo(_line(r)))
    records = run_train(strategy, device=device, gpus=gpus if device == "cuda" else None, out=out, echo=echo,
                        model=model, model_config=model_config, model_path=model_path, nprocs=nprocs, steps=steps,
                        warmup_steps=warmup_steps, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                        lr=lr, precision=precision, trace_steps=trace_steps, dataset=dataset, fabric=fabric,
                        nnodes=nnodes, node_rank=node_rank, master_addr=master_addr, master_port=master_port,
                        timeout_s=timeout_s, stall_timeout_s=stall_timeout_s, backend=backend, max_steps=max_steps, target_ci=target_ci or None,
                        repeats=repeats, max_repeats=max_repeats, time_budget_s=time_budget_s, quiet=as_json)
    if not as_json and records:
        tables.render(tables.console(), f"train: {model or model_config or model_path}, {device}", TRAIN_COLS,
                      [_cells(r) for r in records])
        figs = reps.figures(records)  # each strategy over its runs, with the run-to-run interval
        for f in figs:
            click.echo(reps.figure_text(f))
        for fab, groups in reps.rankings(figs).items():
            if sum(map(len, groups)) > 1:
                click.echo(f"fastest on {fab}: {reps.ranking_text(groups)}")
    # exit 1 when a run failed (a dead rank, a crash, a timeout, a strategy that did not run as asked),
    # though every record (and a dead rank's measured steps) was written; oom and waived are results.
    failed = [r for r in records if r.get("status") in (Status.ERROR, Status.TIMEOUT)]
    if failed:
        raise FabricbenchError("; ".join(f"{r['strategy']}: {str(r.get('message'))[:300]}" for r in failed)
                               + (f" (records written to {out})" if out else ""))
