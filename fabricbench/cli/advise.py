"""`fabricbench advise`: which GPUs and which strategy for a job, with the reasons and a runner-up.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box-topo.txt --gpu-memory 80GB
    fabricbench advise --model dinov2-base --num-gpus 4 --results run/ --json      (a study's directory)

Works offline from saved files: a `nvidia-smi topo -m` text (or `fabricbench topo --json`) and results
(JSONL files or study directories). The decision lives in fabricbench/advising/api.py.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli import warn
from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON, NUM_GPUS, TOPO_FILE
from fabricbench.cli.types import InputPath, Size
from fabricbench.measuring.config import SweepConfig
from fabricbench.training.config import TrainConfig

from fabricbench.advising.api import advise as run_advise
from fabricbench.advising.format import render

# advise's batch defaults to 1 (the activation estimate of the smallest job), train's to 8 (a measured run)
ADVISE_BATCH = "Per-GPU batch for the activations."


@click.command()
@declared_option(TrainConfig, "model")
@declared_option(TrainConfig, "model_config")
@option(NUM_GPUS, "num_gpus")
@declared_option(SweepConfig, "gpus", help="GPUs to choose from (with --num-gpus) or the set to judge.",
                 default_by="all in the topology")
@option(TOPO_FILE, "topo_file", aliases=("--topo",))
@click.option("--results", multiple=True, type=InputPath(folder=True), help="Results JSONL or a study directory (repeatable).")
@click.option("--gpu-memory", type=Size(), default=None, help="Memory per GPU, e.g. 80GB (10^9 B) or 80GiB (a bare G is GiB), when the topology "
                                                 "does not say it.")
@declared_option(TrainConfig, "batch_size", default=1, help=ADVISE_BATCH)
@declared_option(TrainConfig, "seq_len")
@declared_option(TrainConfig, "image_size")
@declared_option(TrainConfig, "strategies", required=False, default=None, help="Comma list to consider.")
@option(JSON, "as_json", help="Print one JSON object.")
def advise(model, model_config, num_gpus, gpus, topo_file, results, gpu_memory, batch_size, seq_len,
           image_size, strategies, as_json) -> None:
    """Rank GPU sets by busbw, check memory per strategy, predict step or comm time, and recommend one."""
    a = run_advise(model=model, model_config=model_config, num_gpus=num_gpus, gpus=gpus,
                   topo_file=topo_file, results=list(results), gpu_memory=gpu_memory,
                   batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                   strategies=strategies)
    for w in a.warnings:  # what --results held that could not be read: said, never dropped in silence
        warn(w)
    if as_json:
        click.echo(json.dumps(a.to_dict(), indent=2))
        return
    render(a)
