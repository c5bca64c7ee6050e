"""Model-state memory per GPU of each strategy, under a named precision recipe.

    fabricbench estimate --model mistral-7b --gpus 4 --json

Ψ parameters, n GPUs. Each recipe says, per kind (params, grads, optimizer = Adam's m and v, master =
a separate fp32 copy of the weights), how many bytes per parameter are kept; each strategy says which
kinds it divides by n (ZeRO-1: optimizer and master; ZeRO-2: + grads; ZeRO-3 and FSDP: everything), as
its module's `shards` declares (fabricbench/training/strategies/).

Recipes (bytes per parameter: params, grads, optimizer, master):
- zero-paper: 2, 2, 8, 4 - the ZeRO paper's mixed-precision Adam, K = 12 = optimizer + master.
  Per GPU: DDP 16Ψ; ZeRO-1 4Ψ + 12Ψ/n; ZeRO-2 2Ψ + 14Ψ/n; ZeRO-3 = FSDP 16Ψ/n (docs/domain.md).
- framework (default): what each framework keeps under bf16 mixed precision, as this project runs it:
  * DDP through Accelerate's autocast: the model stays fp32, so params 4, grads 4 (fp32, the all-reduce
    buckets are a view of them), m and v 8, no separate master (the fp32 parameter is updated in place).
    bf16 copies made by autocast are per-op and transient (activations, not model state).
  * DeepSpeed ZeRO-1/2/3 with bf16 enabled: bf16 params 2 and bf16 grads 2, fp32 master 4, fp32 m and v 8;
    the master and the moments are partitioned from stage 1, grads from stage 2, params at stage 3.
    ZeRO-1 counts its full bf16 gradients, held until they are reduced at the accumulation boundary.
    An fp32 copy of this rank's gradient partition (4Ψ/n) is made inside step() and freed after.
  * FSDP2 with Accelerate's bf16 MixedPrecisionPolicy: the sharded parameters stay fp32 and are the
    master; grads fp32 (sharded, in the parameter's dtype), m and v fp32, all divided by n:
    4, 4, 8, 0 per parameter over n. One FSDP unit's bf16 parameters (gathered) and gradients exist
    transiently per block; they are not counted.
- framework-fp32: the same frameworks under `train --precision fp32` (no autocast): DDP and FSDP2 as
  above (4, 4, 8, 0); DeepSpeed keeps fp32 params and grads and still a separate fp32 master partition
  (4, 4, 8, 4; measured on CPU, DeepSpeed 0.19.8). bf16 and fp16 keep what `framework` says.
- fp32: pure fp32 Adam, no mixed precision: 4, 4, 8, 0, sharded per strategy as above.
Not counted by any recipe: activations (see activation_bytes), communication buckets (DDP 25 MB,
DeepSpeed's reduce/allgather buckets), the CUDA context and allocator fragmentation.

Activation estimate (optional, needs batch and sequence length; never sharded by these strategies):
per transformer layer about 34·s·b·h bytes in 16-bit, Korthikanti et al. 2022, "Reducing Activation
Recomputation", Eq. 1 without the 5·a·s²·b attention-score term, which fused SDPA/flash attention does
not store. s = tokens per sample (ViT: (image/patch)² + 1), b = per-GPU batch, h = hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.registry import Registry
from fabricbench.training.models import CAUSAL_LM, describe
from fabricbench.training.strategies import OPTIMIZER, STRATEGIES

KINDS = ("params", "grads", "optimizer", "master")


def _sharded() -> dict[str, frozenset[str]]:
    """Which kinds each strategy divides by n, from the strategies' own `shards` (the one definition, also
    checked against the bytes each rank holds by verify.py). The fp32 master copy is an optimizer state
    (ZeRO partitions it with m and v from stage 1), so it goes wherever OPTIMIZER goes."""
    return {s.name: frozenset(s.shards | ({"master"} if OPTIMIZER in s.shards else set())) for s in STRATEGIES}


SHARDED: dict[str, frozenset[str]] = _sharded()
STRATEGY_NAMES = tuple(SHARDED)

# Bounds on the sizes a user types: past them the arithmetic still works but names no real job.
MAX_GPUS = 2**20  # more GPUs than any job spans
MAX_BATCH = 2**20  # samples per GPU per step
MAX_SEQ_LEN = 2**24  # tokens per sample
MAX_IMAGE = 2**16  # pixels per side


def check_sizes(*, num_gpus: int | None = None, batch_size: int | None = None, seq_len: int | None = None,
                image_size: int | None = None) -> None:
    """A one-line UsageError for a GPU count, batch, sequence length or image size out of its range."""
    for flag, value, top in (("--gpus", num_gpus, MAX_GPUS), ("--batch-size", batch_size, MAX_BATCH),
                             ("--seq-len", seq_len, MAX_SEQ_LEN), ("--image-size", image_size, MAX_IMAGE)):
        if value is None:
            continue
        if value < 1:
            raise UsageError(f"{flag} {value}: needs at least 1")
        if value > top:
            raise UsageError(f"{flag} {value}: more than {top:,} (2^{top.bit_length() - 1}) names no real job; "
                             f"lower it")


@dataclass(frozen=True, kw_only=True)
class Recipe:
    name: str
    description: str
    # strategy -> kind -> bytes per parameter (before sharding)
    bytes_per_param: dict[str, dict[str, int]]


def _same(params: int, grads: int, optimizer: int, master: int) -> dict[str, dict[str, int]]:
    per = {"params": params, "grads": grads, "optimizer": optimizer, "master": master}
    return {s: dict(per) for s in STRATEGY_NAMES}


_ZERO_DS = {"params": 2, "grads": 2, "optimizer": 8, "master": 4}
_AUTOCAST = {"params": 4, "grads": 4, "optimizer": 8, "master": 0}
_ZERO_DS_FP32 = {"params": 4, "grads": 4, "optimizer": 8, "master": 4}
RECIPES: Registry[Recipe] = Registry("recipe")
for _r in (
    Recipe(name="framework", description="what Accelerate DDP, DeepSpeed ZeRO and FSDP2 keep under bf16",
           bytes_per_param={"ddp": dict(_AUTOCAST), "zero1": dict(_ZERO_DS), "zero2": dict(_ZERO_DS),
                            "zero3": dict(_ZERO_DS), "fsdp": dict(_AUTOCAST)}),
    Recipe(name="framework-fp32", description="what the same frameworks keep with no mixed precision (fp32)",
           bytes_per_param={"ddp": dict(_AUTOCAST), "zero1": dict(_ZERO_DS_FP32), "zero2": dict(_ZERO_DS_FP32),
                            "zero3": dict(_ZERO_DS_FP32), "fsdp": dict(_AUTOCAST)}),
    Recipe(name="zero-paper", description="ZeRO paper: 2Ψ params + 2Ψ grads + 12Ψ (master + m + v)",
           bytes_per_param=_same(2, 2, 8, 4)),
    Recipe(name="fp32", description="pure fp32 Adam: 4Ψ params + 4Ψ grads + 8Ψ (m + v)",
           bytes_per_param=_same(4, 4, 8, 0)),
):
    RECIPES.register(_r.name, _r)


def model_states(*, psi: int, num_gpus: int, recipe: str = "framework") -> dict[str, dict[str, int]]:
    """strategy -> {params_bytes, grads_bytes, optimizer_bytes, master_bytes, total_bytes} per GPU.

    A sharded kind is ceil(bytes / n): every rank's partition is padded to a whole share.
    """
    check_sizes(num_gpus=num_gpus)
    rec = RECIPES.get(recipe)
    out: dict[str, dict[str, int]] = {}
    for strategy in STRATEGY_NAMES:
        row = {}
        for kind in KINDS:
            full = rec.bytes_per_param[strategy][kind] * psi
            row[f"{kind}_bytes"] = -(-full // num_gpus) if kind in SHARDED[strategy] else full
        row["total_bytes"] = sum(row.values())
        out[strategy] = row
    return out


def tokens_per_sample(config: Any, *, task: str, seq_len: int, image_size: int) -> int:
    if task == CAUSAL_LM:
        return seq_len
    return (image_size // config.patch_size) ** 2 + 1  # patches + CLS


def activation_bytes(config: Any, *, task: str, batch_size: int, seq_len: int, image_size: int,
                     precision: str = "bf16") -> int:
    """34·s·b·h·L bytes (see the module docstring); twice that in fp32, whose activations are 4-byte."""
    lm = task == CAUSAL_LM  # the other length does not enter the formula
    check_sizes(batch_size=batch_size, seq_len=seq_len if lm else None, image_size=None if lm else image_size)
    s = tokens_per_sample(config, task=task, seq_len=seq_len, image_size=image_size)
    return 34 * s * batch_size * config.hidden_size * config.num_hidden_layers * (2 if precision == "fp32" else 1)


def document(*, model: str, psi: int, num_gpus: int, recipe: str = "framework",
             activations: int | None = None) -> dict[str, Any]:
    """The --json document (fabricbench.estimate returns it as an EstimateResult)."""
    doc: dict[str, Any] = {"model": model, "params": psi, "num_gpus": num_gpus, "recipe": recipe,
                           "strategies": model_states(psi=psi, num_gpus=num_gpus, recipe=recipe)}
    if activations is not None:
        doc["activation_bytes"] = activations
    return doc


def for_model(*, model: str | None = None, model_config: str | None = None, num_gpus: int,
              recipe: str = "framework", batch_size: int | None = None, seq_len: int = 512,
              image_size: int = 224, strategies: str | list[str] | None = None) -> dict[str, Any]:
    """`fabricbench estimate`: a model by name or config file, its --json document (with
    activation_bytes when `batch_size` is given; only `strategies`, a comma list or names, when given).
    Every number is checked before the model is looked at; a built-in model needs no transformers."""
    RECIPES.get(recipe)
    names = STRATEGIES.pick(strategies or None, option="strategies")
    check_sizes(num_gpus=num_gpus, batch_size=batch_size, seq_len=seq_len, image_size=image_size)
    resolved = describe(name=model, config_file=model_config)
    act = None
    if batch_size is not None:
        act = activation_bytes(resolved.shape, task=resolved.task, batch_size=batch_size, seq_len=seq_len,
                               image_size=image_size)
    doc = document(model=resolved.name, psi=resolved.params, num_gpus=num_gpus, recipe=recipe, activations=act)
    doc["strategies"] = {k: v for k, v in doc["strategies"].items() if k in names}
    return doc
