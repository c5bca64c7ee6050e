"""`fabricbench estimate`: model-state memory per GPU of ddp, zero1, zero2, zero3 and fsdp.

    fabricbench estimate --model mistral-7b --gpus 8
    fabricbench estimate --model mistral-7b --strategies fsdp --gpus 8
    fabricbench estimate --model dinov2-large --gpus 4 --recipe zero-paper --batch-size 256 --json

The recipes and the formulas are in fabricbench/training/estimate.py. The built-in models need no
transformers (their parameter counts are formulas of their config numbers); --model-config does.
Estimate touches no GPU, so its --gpus is how many the job spans: a count (8), or a GPU list (0-7)
whose entries count; --num-gpus, its old name, still works and warns (docs/options.md).
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON
from fabricbench.cli.types import Text
from fabricbench.declare import Declared
from fabricbench.training import estimate as est
from fabricbench.training.config import TrainConfig
from fabricbench.training.format import estimate_lines

GPUS = Declared(flag="--gpus", kind="GPU count", help="GPUs the model states are divided over: a count (8) or a "
                "GPU list (0-7).", concept="gpus", aliases=("--num-gpus",))


@click.command()
@declared_option(TrainConfig, "model")
@declared_option(TrainConfig, "model_config")
@option(GPUS, "gpus", required=True)
@declared_option(TrainConfig, "strategies", required=False, default=None,
                 help="Comma list of the strategies to show (ddp, zero1, zero2, zero3, fsdp), or all.")
@click.option("--recipe", type=Text(), default="framework", show_default=True,
              help=f"Bytes per parameter: {', '.join(est.RECIPES.names())}.")
@declared_option(TrainConfig, "batch_size", default=None,
                 help="Per-GPU batch, for the activation estimate (default: none).")
@declared_option(TrainConfig, "seq_len")
@declared_option(TrainConfig, "image_size")
@option(JSON, "as_json", help="Print the estimate as one JSON object.")
def estimate(model, model_config, gpus, strategies, recipe, batch_size, seq_len, image_size, as_json) -> None:
    """Bytes per GPU of parameters, gradients, optimizer states and fp32 master weights, per strategy."""
    doc = est.for_model(model=model, model_config=model_config, num_gpus=gpus, recipe=recipe,
                        batch_size=batch_size, seq_len=seq_len, image_size=image_size, strategies=strategies)
    if as_json:
        click.echo(json.dumps(doc))
        return
    for line in estimate_lines(doc):
        click.echo(line)
