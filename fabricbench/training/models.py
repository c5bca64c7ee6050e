"""Models built from configs, randomly initialised, never downloaded.

    fabricbench estimate --model mistral-7b --num-gpus 4      (counts 7.24e9 parameters on the meta device)

Each named model is one row of MODELS: its task ("causal-lm" or "image-cls") and a function returning a
transformers config. `--model-config FILE` reads any transformers config JSON (the task follows from its
`architectures`, or from the model type), `--model-path DIR` loads local pretrained weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.registry import Registry

CAUSAL_LM = "causal-lm"
IMAGE_CLS = "image-cls"

FOOD101_CLASSES = 101  # the reference study fine-tunes DINOv2 on Food-101


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    task: str  # CAUSAL_LM or IMAGE_CLS
    description: str
    config: Callable[[], Any]  # -> transformers.PretrainedConfig
    layer_class: str  # the transformer block, the unit FSDP wraps


def _mistral(**kw: Any) -> Callable[[], Any]:
    def make() -> Any:
        from transformers import MistralConfig

        return MistralConfig(**kw)

    return make


def _dinov2(**kw: Any) -> Callable[[], Any]:
    def make() -> Any:
        from transformers import Dinov2Config

        return Dinov2Config(image_size=224, num_labels=FOOD101_CLASSES, **kw)

    return make


MODELS: Registry[ModelSpec] = Registry("model")
for _spec in (
    ModelSpec(name="mistral-7b", task=CAUSAL_LM, description="transformers' MistralConfig() defaults (7.24e9)",
              config=_mistral(), layer_class="MistralDecoderLayer"),
    ModelSpec(name="mistral-1b", task=CAUSAL_LM,
              description="Mistral, hidden 2048, 20 layers, 16 heads, 4 KV heads, MLP 5632 (1.03e9)",
              config=_mistral(hidden_size=2048, intermediate_size=5632, num_hidden_layers=20,
                              num_attention_heads=16, num_key_value_heads=4),
              layer_class="MistralDecoderLayer"),
    ModelSpec(name="tiny-mistral", task=CAUSAL_LM, description="Mistral, hidden 64, 2 layers, vocab 256 (CPU)",
              config=_mistral(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, vocab_size=256, max_position_embeddings=512),
              layer_class="MistralDecoderLayer"),
    ModelSpec(name="dinov2-base", task=IMAGE_CLS, description="Dinov2Config defaults, 224 px, 101 classes (8.6e7)",
              config=_dinov2(), layer_class="Dinov2Layer"),
    ModelSpec(name="dinov2-large", task=IMAGE_CLS,
              description="DINOv2 large: hidden 1024, 24 layers, 16 heads, 224 px, 101 classes (3.0e8)",
              config=_dinov2(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16),
              layer_class="Dinov2Layer"),
    ModelSpec(name="tiny-dinov2", task=IMAGE_CLS, description="DINOv2, hidden 64, 2 layers, 32 px (CPU)",
              config=lambda: __import__("transformers").Dinov2Config(
                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8,
                  num_labels=FOOD101_CLASSES),
              layer_class="Dinov2Layer"),
):
    MODELS.register(_spec.name, _spec)


@dataclass(frozen=True, kw_only=True)
class ResolvedModel:
    """What a run trains: a name for the record, the task, the config, the block class, weights if any."""

    name: str
    task: str
    config: Any
    layer_class: str | None
    path: str | None = None  # local pretrained weights


def _task_of(config: Any) -> str:
    archs = " ".join(getattr(config, "architectures", None) or [])
    if "ImageClassification" in archs or getattr(config, "image_size", None) is not None:
        return IMAGE_CLS
    return CAUSAL_LM


def resolve(*, name: str | None = None, config_file: str | None = None, path: str | None = None) -> ResolvedModel:
    """Exactly one of a registered name, a config JSON or a weights folder."""
    given = [x for x in (name, config_file, path) if x]
    if len(given) != 1:
        raise UsageError("name exactly one of --model NAME, --model-config FILE, --model-path DIR "
                         f"(got {len(given)}); models: {', '.join(MODELS.names())}")
    if name:
        spec = MODELS.get(name)
        return ResolvedModel(name=spec.name, task=spec.task, config=spec.config(), layer_class=spec.layer_class)
    from transformers import AutoConfig

    src = Path(config_file or path)  # type: ignore[arg-type]
    if not src.exists():
        raise UsageError(f"{'--model-config' if config_file else '--model-path'} {src}: no such file or folder")
    if config_file:
        data = json.loads(src.read_text())
        if "model_type" not in data:
            raise UsageError(f"--model-config {src}: no \"model_type\" field; is it a transformers config?")
        config = AutoConfig.for_model(**data)
    else:
        config = AutoConfig.from_pretrained(str(src), local_files_only=True)
    return ResolvedModel(name=src.stem if config_file else src.name, task=_task_of(config), config=config,
                         layer_class=None, path=str(src) if path else None)


def build(model: ResolvedModel, *, meta: bool = False, device: Any = None) -> Any:
    """The torch module: random fp32 weights from the config, or local weights; created on `device`
    (the meta device when `meta`: shapes only)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageClassification

    auto = AutoModelForCausalLM if model.task == CAUSAL_LM else AutoModelForImageClassification
    if model.path and not meta:
        return auto.from_pretrained(model.path, local_files_only=True, dtype=torch.float32).to(device or "cpu")
    with torch.device("meta" if meta else (device or "cpu")):
        return auto.from_config(model.config, dtype=torch.float32)


def count_params(model: ResolvedModel) -> int:
    """Ψ, from the config on the meta device: no memory, instant even for mistral-7b."""
    return sum(p.numel() for p in build(model, meta=True).parameters())


def block_class_names(module: Any, hint: str | None) -> list[str]:
    """The transformer block class FSDP wraps: the registered one, or the model's `_no_split_modules`."""
    if hint:
        return [hint]
    names = list(getattr(module, "_no_split_modules", None) or [])
    assert names, f"{type(module).__name__} names no _no_split_modules; cannot choose FSDP units"
    return names


UNUSED_IN_FINE_TUNING = ("mask_token",)  # DINOv2: used only by masked-image pretraining (bool_masked_pos)


def freeze_unused(module: Any) -> list[str]:
    """Freeze parameters that never reach the loss, for every strategy alike (DDP refuses them otherwise)."""
    frozen = [n for n, p in module.named_parameters() if n.rsplit(".", 1)[-1] in UNUSED_IN_FINE_TUNING]
    for n, p in module.named_parameters():
        if n in frozen:
            p.requires_grad_(False)
    return frozen
