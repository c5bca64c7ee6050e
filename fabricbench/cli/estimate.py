"""`fabricbench estimate`: model-state memory per GPU of ddp, zero1, zero2, zero3 and fsdp.

    fabricbench estimate --model mistral-7b --num-gpus 4
    fabricbench estimate --model dinov2-large --num-gpus 4 --recipe zero-paper --batch-size 256 --json

The recipes and the formulas are in fabricbench/training/estimate.py. The built-in models need no
transformers (their parameter counts are formulas of their config numbers); --model-config does.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.types import Count, InputPath, Text

from fabricbench.report.analysis import byte_unit, fmt_count
from fabricbench.training import estimate as est, models



@click.command()
@click.option("--model", type=Text(), default=None, help="A model name (fabricbench train --list).")
@click.option("--model-config", type=InputPath(), default=None, help="A transformers config JSON.")
@click.option("--num-gpus", type=Count(1, 2**20), required=True, help="GPUs the model states are divided over.")
@click.option("--recipe", type=Text(), default="framework", show_default=True,
              help=f"Bytes per parameter: {', '.join(est.RECIPES.names())}.")
@click.option("--batch-size", type=Count(1, 2**20), default=None, help="Per-GPU batch, for the activation estimate.")
@click.option("--seq-len", type=Count(1, 2**24), default=512, show_default=True, help="Tokens per sample (causal LM).")
@click.option("--image-size", type=Count(1, 2**16), default=224, show_default=True, help="Pixels per side (images).")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as one JSON object.")
def estimate(model, model_config, num_gpus, recipe, batch_size, seq_len, image_size, as_json) -> None:
    """Bytes per GPU of parameters, gradients, optimizer states and fp32 master weights, per strategy."""
    # Every number is checked before the model is looked at; a built-in model needs no transformers.
    est.RECIPES.get(recipe)
    est.check_sizes(num_gpus=num_gpus, batch_size=batch_size, seq_len=seq_len, image_size=image_size)
    resolved = models.describe(name=model, config_file=model_config)
    psi = resolved.params
    act = None
    if batch_size is not None:
        act = est.activation_bytes(resolved.shape, task=resolved.task, batch_size=batch_size, seq_len=seq_len,
                                   image_size=image_size)
    doc = est.estimate(model=resolved.name, psi=psi, num_gpus=num_gpus, recipe=recipe, activations=act)
    if as_json:
        click.echo(json.dumps(doc))
        return

    unit, scale = byte_unit(max(row["total_bytes"] for row in doc["strategies"].values()))
    click.echo(f"{resolved.name}: {psi:,} parameters ({fmt_count(psi)}), {num_gpus} GPU(s), recipe {recipe}")
    click.echo(f"{'strategy':<8} {'params':>10} {'grads':>10} {'optimizer':>10} {'master':>10} {'total':>10}  {unit}")
    for name, row in doc["strategies"].items():
        cells = [f"{row[k] / scale:10.2f}" for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                                                     "master_bytes", "total_bytes")]
        click.echo(f"{name:<8} " + " ".join(cells))
    if act is not None:
        click.echo(f"activations (not sharded, per GPU): {act / scale:.2f} {unit}")
