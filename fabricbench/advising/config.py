"""`fabricbench.advise`'s one config: the job to place, the topology and the results to judge it by.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box.txt --gpu-memory 80GB
    a = fabricbench.advise(fabricbench.AdviseConfig(model="mistral-7b", num_gpus=4, topo_file="box.txt",
                                                    gpu_memory="80GB"))

Every option is declared on its field (fabricbench/declare.py) and fabricbench/cli/advise.py is made from
them. A config is checked without touching the disk: what needs the topology (are --gpus in it, does
--num-gpus fit them) or the model is checked by the call, once it has read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricbench.declare import check, declare, of, shared
from fabricbench.errors import UsageError
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.config import SweepConfig
from fabricbench.sizes import parse_size
from fabricbench.topology import TOPO_FILE
from fabricbench.topology.model import Topology
from fabricbench.training import estimate as est
from fabricbench.training.config import TrainConfig
from fabricbench.training.strategies import STRATEGIES


def parse_memory(value: Any) -> int | None:
    """'80GB' (10^9 B), '80GiB' or '80G' (2^30 B: a bare G is binary, as in every size option), '141e9' or
    bytes -> bytes (fabricbench/sizes.py's one rule)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?e\d+", text, re.IGNORECASE):
        return int(float(text))
    try:
        return parse_size(text)
    except UsageError:
        raise UsageError(f"--gpu-memory {value!r}: write e.g. 80GB (10^9 B), 80GiB or 80G (2^30 B), or a byte "
                         f"count") from None


@dataclass(frozen=True, kw_only=True)
class AdviseConfig:
    """The job and what to judge it by; checked once, here, for the CLI and the library alike."""

    model: str | None = field(default=None, metadata=shared(of(TrainConfig, "model")))
    model_config: str | None = field(default=None, metadata=shared(of(TrainConfig, "model_config")))
    # how many of the pool the job uses; None: all of them (the call checks it against the pool)
    num_gpus: int | None = field(default=None, metadata=declare(
        "--num-gpus", "count", "How many of --gpus the job uses.", lo=1, hi=1024, default_by="all of --gpus"))
    # the pool to choose from; a GPU list text is read as the CLI reads it
    gpus: str | tuple[int, ...] | None = field(default=None, metadata=shared(
        of(SweepConfig, "gpus"), help="GPUs to choose from (with --num-gpus) or the set to judge.",
        default_by="all in the topology"))
    topo_file: str | None = field(default=None, metadata=shared(TOPO_FILE, aliases=("--topo",)))
    # results files, study folders, or records already read (dicts, checked as a file's lines are)
    results: tuple[Any, ...] = field(default=(), metadata=declare(
        "--results", "input file or folder", "Results JSONL or a study directory (repeatable)."))
    # bytes per GPU; a size text is read as --gpu-memory reads it
    gpu_memory: int | str | None = field(default=None, metadata=declare(
        "--gpu-memory", "size", "Memory per GPU, e.g. 80GB (10^9 B) or 80GiB (a bare G is GiB), when the "
        "topology does not say it."))
    # advise's batch defaults to 1 (the activation estimate of the smallest job), train's to 8 (a measured run)
    batch_size: int = field(default=1, metadata=shared(of(TrainConfig, "batch_size"),
                                                       help="Per-GPU batch for the activations."))
    seq_len: int = field(default=512, metadata=shared(of(TrainConfig, "seq_len")))
    image_size: int = field(default=224, metadata=shared(of(TrainConfig, "image_size")))
    # names in STRATEGIES, in the order shown; a comma text is read as the CLI reads it, () is all of them
    strategies: str | tuple[str, ...] = field(default=(), metadata=shared(
        of(TrainConfig, "strategies"), help="Comma list to consider."))
    # the library's own: no flag, since the CLI reads a topology from --topo-file and measures on "default"
    recipe: str = "framework"  # a name in estimate.RECIPES: bytes per parameter of the memory estimate
    fabric: str = "default"  # the fabric whose measured busbw ranks the GPU sets
    topo: Topology | str | None = None  # a Topology already read (or a path), instead of topo_file

    def __post_init__(self) -> None:
        check(self)  # the declared ranges, in the words every config uses
        # the cheap checks, before the call reads a file or builds the model
        results = (self.results,) if isinstance(self.results, (str, Path, dict)) else tuple(self.results or ())
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "strategies", tuple(STRATEGIES.pick(self.strategies or None, option="strategies")))
        object.__setattr__(self, "gpu_memory", parse_memory(self.gpu_memory))
        if isinstance(self.gpus, str):
            object.__setattr__(self, "gpus", tuple(parse_gpus(self.gpus)))
        elif self.gpus is not None:
            object.__setattr__(self, "gpus", tuple(self.gpus))
        est.RECIPES.get(self.recipe)
