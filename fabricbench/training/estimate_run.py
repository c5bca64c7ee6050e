"""`fabricbench.estimate`: the model-state memory per GPU of each strategy, as `fabricbench estimate` prints it.

    fabricbench estimate --model mistral-7b --gpus 8 --json
    r = fabricbench.estimate(fabricbench.EstimateConfig(model="mistral-7b", gpus=8))
    r.strategies["fsdp"]["total_bytes"]

The formulas and recipes are in estimate.py; this module is the command's one config and result. A model
file is read by the call, not by the config: a config is checked without touching the disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricbench.errors import expect_config
from fabricbench.declare import check, declare, of, shared
from fabricbench.training import estimate as est
from fabricbench.training.config import TrainConfig
from fabricbench.training.strategies import STRATEGIES


@dataclass(frozen=True, kw_only=True)
class EstimateConfig:
    """What to estimate; checked once, here, for the CLI and the library alike."""

    model: str | None = field(default=None, metadata=shared(of(TrainConfig, "model")))
    model_config: str | None = field(default=None, metadata=shared(of(TrainConfig, "model_config")))
    # estimate touches no GPU: how many GPUs the job divides its states over (the CLI also counts a GPU list)
    gpus: int = field(metadata=declare(
        "--gpus", "GPU count", "GPUs the model states are divided over: a count (8) or a GPU list (0-7).",
        concept="gpus", aliases=("--num-gpus",)))
    # names in STRATEGIES, in the order shown; a comma text is read as the CLI reads it, () is all of them
    strategies: str | tuple[str, ...] = field(default=(), metadata=shared(
        of(TrainConfig, "strategies"),
        help="Comma list of the strategies to show (ddp, zero1, zero2, zero3, fsdp), or all."))
    recipe: str = field(default="framework", metadata=declare(  # a name in estimate.RECIPES
        "--recipe", "text", f"Bytes per parameter: {', '.join(est.RECIPES.names())}."))
    # samples per GPU for the activation estimate; None leaves activations out
    batch_size: int | None = field(default=None, metadata=shared(
        of(TrainConfig, "batch_size"), help="Per-GPU batch, for the activation estimate (default: none)."))
    seq_len: int = field(default=512, metadata=shared(of(TrainConfig, "seq_len")))
    image_size: int = field(default=224, metadata=shared(of(TrainConfig, "image_size")))

    def __post_init__(self) -> None:
        check(self)  # the declared ranges, in the words every config uses
        # then the command's own checks, in its order: recipe, strategies, the counts
        est.RECIPES.get(self.recipe)
        names = STRATEGIES.pick(self.strategies or None, option="strategies")
        object.__setattr__(self, "strategies", tuple(names))
        est.check_sizes(num_gpus=self.gpus, batch_size=self.batch_size, seq_len=self.seq_len,
                        image_size=self.image_size)


@dataclass(frozen=True, kw_only=True)
class EstimateResult:
    """Bytes per GPU of each strategy's model states (and of the activations, when a batch was given)."""

    model: str
    params: int  # Ψ, the parameter count
    num_gpus: int
    recipe: str
    strategies: dict[str, dict[str, int]]  # strategy -> {params_bytes, ..., total_bytes} per GPU
    activation_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench estimate --json` prints."""
        doc: dict[str, Any] = {"model": self.model, "params": self.params, "num_gpus": self.num_gpus,
                               "recipe": self.recipe, "strategies": self.strategies}
        if self.activation_bytes is not None:
            doc["activation_bytes"] = self.activation_bytes
        return doc


def estimate(config: EstimateConfig) -> EstimateResult:
    """Model-state bytes per GPU of config.strategies (in the order of STRATEGIES) for config.model (or
    config.model_config)."""
    expect_config(config, EstimateConfig, "estimate")
    doc = est.for_model(model=config.model, model_config=config.model_config, num_gpus=config.gpus,
                        recipe=config.recipe, batch_size=config.batch_size, seq_len=config.seq_len,
                        image_size=config.image_size, strategies=list(config.strategies))
    return EstimateResult(**doc)
