"""`fabricbench advise`: which GPUs and which strategy for a job, with the reasons and a runner-up.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box-topo.txt --gpu-memory 80GB
    fabricbench advise --model dinov2-base --num-gpus 4 --results run/ --json      (a study's directory)

Works offline from saved files: a `nvidia-smi topo -m` text (or `fabricbench topo --json`) and results
(JSONL files or study directories). The decision lives in fabricbench/advise/api.py.
"""

from __future__ import annotations

import json

import click

from fabricbench.cli import warn

from fabricbench.cli.types import STRATEGY_REGISTRY, Count, GpuList, InputPath, NameList, Size, Text

from fabricbench.advise.api import advise as run_advise
from fabricbench.advise.format import render
from fabricbench.errors import UsageError


@click.command()
@click.option("--model", type=Text(), default=None, help="A model name (fabricbench train --list).")
@click.option("--model-config", type=InputPath(), default=None, help="A transformers config JSON.")
@click.option("--num-gpus", type=Count(1, 1024), default=None, help="GPUs the job uses (default: all of --gpus).")
@click.option("--gpus", type=GpuList(), default=None, help="GPUs to choose from (with --num-gpus) or the set to judge.")
@click.option("--topo", "topo_file", default=None, type=InputPath(),
              help="A saved `nvidia-smi topo -m` or `fabricbench topo --json` (default: this machine).")
@click.option("--topo-file", "topo_file2", default=None, type=InputPath(), help="Same as --topo.")
@click.option("--results", multiple=True, type=InputPath(folder=True), help="Results JSONL or a study directory (repeatable).")
@click.option("--gpu-memory", type=Size(), default=None, help="Memory per GPU, e.g. 80GB (10^9 B) or 80GiB (a bare G is GiB), when the topology "
                                                 "does not say it.")
@click.option("--batch-size", type=Count(1, 2**20), default=1, show_default=True, help="Per-GPU batch for the activations.")
@click.option("--seq-len", type=Count(1, 2**24), default=512, show_default=True, help="Tokens per sample (causal LM).")
@click.option("--image-size", type=Count(1, 2**16), default=224, show_default=True, help="Pixels per side (images).")
@click.option("--strategies", type=NameList(STRATEGY_REGISTRY, "strategy", allow_all=True), default=None, help="Comma list to consider (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def advise(model, model_config, num_gpus, gpus, topo_file, topo_file2, results, gpu_memory, batch_size, seq_len,
           image_size, strategies, as_json) -> None:
    """Rank GPU sets by busbw, check memory per strategy, predict step or comm time, and recommend one."""
    if topo_file and topo_file2 and topo_file != topo_file2:
        raise UsageError("--topo and --topo-file name different files; give one")
    a = run_advise(model=model, model_config=model_config, num_gpus=num_gpus, gpus=gpus,
                   topo_file=topo_file or topo_file2, results=list(results), gpu_memory=gpu_memory,
                   batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                   strategies=strategies)
    for w in a.warnings:  # what --results held that could not be read: said, never dropped in silence
        warn(w)
    if as_json:
        click.echo(json.dumps(a.to_dict(), indent=2))
        return
    render(a)
