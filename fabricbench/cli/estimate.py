"""`fabricbench estimate`: model-state memory per GPU of ddp, zero1, zero2, zero3 and fsdp.

    fabricbench estimate --model mistral-7b --gpus 8
    fabricbench estimate --model mistral-7b --strategies fsdp --gpus 8
    fabricbench estimate --model dinov2-large --gpus 4 --recipe zero-paper --batch-size 256 --json

This layer only maps flags to fabricbench.estimate (fabricbench/training/estimate_run.py), whose config
declares every option; the recipes and the formulas are in fabricbench/training/estimate.py. The built-in
models need no transformers (their parameter counts are formulas of their config numbers); --model-config
does. Estimate touches no GPU, so its --gpus is how many the job spans: a count (8), or a GPU list (0-7)
whose entries count; --num-gpus, its old name, still works and warns (docs/options.md).
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.declared import config_options, option
from fabricbench.cli.options import JSON
from fabricbench.training.estimate_run import EstimateConfig
from fabricbench.training.estimate_run import estimate as estimate_call
from fabricbench.training.format import estimate_lines


@click.command()
@config_options(EstimateConfig)
@option(JSON, "as_json", help="Print the estimate as one JSON object.")
def estimate(as_json, **fields) -> None:
    """Bytes per GPU of parameters, gradients, optimizer states and fp32 master weights, per strategy."""
    doc = estimate_call(EstimateConfig(**fields)).to_dict()
    if as_json:
        click.echo(json.dumps(doc))
        return
    for line in estimate_lines(doc):
        click.echo(line)
