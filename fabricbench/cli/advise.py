"""`fabricbench advise`: which GPUs and which strategy for a job, with the reasons and a runner-up.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box-topo.txt --gpu-memory 80GB
    fabricbench advise --model dinov2-base --num-gpus 4 --results run/ --json      (a study's directory)

Works offline from saved files: a `nvidia-smi topo -m` text (or `fabricbench topo --json`) and results
(JSONL files or study directories). This layer only maps flags to fabricbench.advise, whose config
(fabricbench/advising/config.py) declares every option; the decision lives in fabricbench/advising/api.py.
"""

from __future__ import annotations

import json

import click

from fabricbench.advising.api import advise as run_advise
from fabricbench.advising.config import AdviseConfig
from fabricbench.advising.format import render
from fabricbench.cli import warn
from fabricbench.cli.declared import config_options, declared_option, option
from fabricbench.cli.options import JSON


@click.command()
@config_options(AdviseConfig, only=("model", "model_config", "num_gpus", "gpus", "topo_file"))
@declared_option(AdviseConfig, "results", multiple=True)
@config_options(AdviseConfig, only=("gpu_memory", "batch_size", "seq_len", "image_size", "strategies"))
@option(JSON, "as_json", help="Print one JSON object.")
def advise(as_json, **fields) -> None:
    """Rank GPU sets by busbw, check memory per strategy, predict step or comm time, and recommend one."""
    a = run_advise(AdviseConfig(**fields))
    for w in a.warnings:  # what --results held that could not be read: said, never dropped in silence
        warn(w)
    if as_json:
        click.echo(json.dumps(a.to_dict(), indent=2))
        return
    render(a)
