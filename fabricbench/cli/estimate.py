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

from fabricbench.training import estimate as est
from fabricbench.training.format import estimate_lines


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
    doc = est.for_model(model=model, model_config=model_config, num_gpus=num_gpus, recipe=recipe,
                        batch_size=batch_size, seq_len=seq_len, image_size=image_size)
    if as_json:
        click.echo(json.dumps(doc))
        return
    for line in estimate_lines(doc):
        click.echo(line)
