"""Models built from configs, randomly initialised, never downloaded.

    fabricbench estimate --model mistral-7b --gpus 4      (7.24e9 parameters, by formula, in well under 2 s)

Each named model is one row of MODELS: its task ("causal-lm" or "image-cls"), its family (the transformers
config class, that class's defaults and Ψ as a formula of the config numbers) and the settings that differ
from the family's defaults. `estimate` on a row needs no transformers. Training builds a row of the Mistral
family with fabricbench's own module (training/native.py: the same parameters, the same numbers, no
transformers to import), any other row from the transformers config of the same numbers. `--model-config
FILE` reads any transformers config JSON (the task follows from its `architectures`, or from the model
type), `--model-path DIR` loads local pretrained weights; both need transformers (the `train` extra) and
say so.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.files import read_input
from fabricbench.registry import Registry

CAUSAL_LM = "causal-lm"
IMAGE_CLS = "image-cls"

FOOD101_CLASSES = 101  # the reference study fine-tunes DINOv2 on Food-101


@dataclass(frozen=True, kw_only=True)
class Family:
    """A model family: its transformers config class, that class's defaults (the numbers `estimate` needs,
    so that it runs without transformers), and Ψ as a formula of those numbers.

    tests/test_estimate.py checks the defaults against transformers' classes and the formula against a
    model built on the meta device, for every row of MODELS.
    """

    config_class: str  # in transformers
    defaults: dict[str, Any]
    params: Callable[[SimpleNamespace], int]
    # fabricbench's own module for this family (its build(config, device=) makes the same model from these
    # numbers, tests/test_native_model.py): a rank that trains a built-in row of it never imports
    # transformers, 2-10 s of every run's start-up (issue 38). None: transformers builds it.
    native: str | None = None


def _mistral_params(c: SimpleNamespace) -> int:
    """MistralForCausalLM: embeddings, per layer q/k/v/o (no bias), gated MLP (3 matrices), two RMSNorms;
    the final norm and an untied LM head."""
    h, layers, inter = c.hidden_size, c.num_hidden_layers, c.intermediate_size
    head_dim = c.head_dim or h // c.num_attention_heads
    attn = h * c.num_attention_heads * head_dim * 2 + h * c.num_key_value_heads * head_dim * 2
    per_layer = attn + 3 * h * inter + 2 * h
    head = 0 if c.tie_word_embeddings else c.vocab_size * h
    return c.vocab_size * h + layers * per_layer + h + head


def _dinov2_params(c: SimpleNamespace) -> int:
    """Dinov2ForImageClassification: patch embedding (conv + bias), CLS and mask tokens, position embeddings;
    per layer two LayerNorms, q/k/v/o with biases, two layer scales, the MLP; the final LayerNorm and a
    classifier on [CLS ; mean of patches] (2h inputs)."""
    h, p = c.hidden_size, c.patch_size
    patches = (c.image_size // p) ** 2
    mlp = int(h * c.mlp_ratio)
    embed = h * c.num_channels * p * p + h + h + h + (patches + 1) * h
    per_layer = 2 * h + 4 * (h * h + h) + h + 2 * h + (h * mlp + mlp) + (mlp * h + h) + h
    return embed + c.num_hidden_layers * per_layer + 2 * h + 2 * h * c.num_labels + c.num_labels


FAMILIES: dict[str, Family] = {
    "mistral": Family(config_class="MistralConfig", params=_mistral_params, defaults=dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=None, tie_word_embeddings=False, max_position_embeddings=131072,
        sliding_window=4096), native="fabricbench.training.native"),
    "dinov2": Family(config_class="Dinov2Config", params=_dinov2_params, defaults=dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, image_size=224, patch_size=14,
        num_channels=3, num_labels=2)),
}


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    task: str  # CAUSAL_LM or IMAGE_CLS
    description: str
    family: str  # a key of FAMILIES
    settings: dict[str, Any]  # the family's config arguments that differ from its defaults
    layer_class: str  # the transformer block, the unit FSDP wraps

    def config(self) -> Any:
        """The transformers config (needs transformers: the `train` extra)."""
        transformers = require_transformers(f"--model {self.name}")
        return getattr(transformers, FAMILIES[self.family].config_class)(**self.settings)

    def shape(self) -> SimpleNamespace:
        """The config's numbers without transformers: the family's defaults with this row's settings."""
        return SimpleNamespace(**{**FAMILIES[self.family].defaults, **self.settings})

    def params(self) -> int:
        """Ψ from the numbers alone, equal to counting the built model (tests/test_estimate.py)."""
        return FAMILIES[self.family].params(self.shape())

    def native(self, seq_len: int | None) -> str | None:
        """The module that builds this row without transformers, where one does at this sequence length:
        the native Mistral attends causally over the whole sequence, which is Mistral's sliding window only
        while the sequence fits in it (longer ones: transformers' model, which masks the window)."""
        window = getattr(self.shape(), "sliding_window", None)
        fits = seq_len is None or window is None or seq_len <= window
        return FAMILIES[self.family].native if fits else None


def require_transformers(what: str) -> Any:
    """transformers, or a one-line UsageError naming the extra that brings it."""
    try:
        import transformers
    except ImportError:
        raise UsageError(f'{what} needs transformers: pip install "fabricbench[train]"') from None
    return transformers


def _mistral(**kw: Any) -> dict[str, Any]:
    return dict(family="mistral", settings=kw, layer_class="MistralDecoderLayer")


def _dinov2(**kw: Any) -> dict[str, Any]:
    return dict(family="dinov2", settings={"image_size": 224, "num_labels": FOOD101_CLASSES, **kw},
                layer_class="Dinov2Layer")


MODELS: Registry[ModelSpec] = Registry("model")
for _spec in (
    ModelSpec(name="mistral-7b", task=CAUSAL_LM, description="transformers' MistralConfig() defaults (7.24e9)",
              **_mistral()),
    ModelSpec(name="mistral-1b", task=CAUSAL_LM,
              description="Mistral, hidden 2048, 20 layers, 16 heads, 4 KV heads, MLP 5632 (1.03e9)",
              **_mistral(hidden_size=2048, intermediate_size=5632, num_hidden_layers=20, num_attention_heads=16,
                         num_key_value_heads=4)),
    ModelSpec(name="tiny-mistral", task=CAUSAL_LM, description="Mistral, hidden 64, 2 layers, vocab 256 (CPU)",
              **_mistral(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256, max_position_embeddings=512)),
    ModelSpec(name="lab-mistral", task=CAUSAL_LM,
              description="Mistral, hidden 128, 2 layers, MLP 384, vocab 1024 (6.6e5; CPU fabric lab: ~0.3 s fp32 "
                          "step per gloo rank at batch 8 x 512, 2.6 MB of fp32 gradients)",
              **_mistral(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1024, max_position_embeddings=512)),
    ModelSpec(name="dinov2-base", task=IMAGE_CLS, description="Dinov2Config defaults, 224 px, 101 classes (8.6e7)",
              **_dinov2()),
    ModelSpec(name="dinov2-large", task=IMAGE_CLS,
              description="DINOv2 large: hidden 1024, 24 layers, 16 heads, 224 px, 101 classes (3.0e8)",
              **_dinov2(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16)),
    ModelSpec(name="tiny-dinov2", task=IMAGE_CLS, description="DINOv2, hidden 64, 2 layers, 32 px (CPU)",
              family="dinov2", settings=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                             image_size=32, patch_size=8, num_labels=FOOD101_CLASSES),
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
    builtin: bool = False  # a row of MODELS (its Ψ has a formula)
    native: str | None = None  # the module that builds it without transformers (Family.native); config is
    # then the row's numbers (a SimpleNamespace), not a transformers config

    @property
    def impl(self) -> str:
        """Who builds the model, for the record: "fabricbench" (its own module) or "transformers"."""
        return "fabricbench" if self.native else "transformers"


def _task_of(config: Any) -> str:
    archs = " ".join(getattr(config, "architectures", None) or [])
    if "ImageClassification" in archs or getattr(config, "image_size", None) is not None:
        return IMAGE_CLS
    return CAUSAL_LM


def resolve(*, name: str | None = None, config_file: str | None = None, path: str | None = None,
            seq_len: int | None = None) -> ResolvedModel:
    """Exactly one of a registered name, a config JSON or a weights folder. A built-in row whose family
    fabricbench builds itself (Family.native; at `seq_len`, where given) resolves without transformers."""
    given = [x for x in (name, config_file, path) if x]
    if len(given) != 1:
        raise UsageError("name exactly one of --model NAME, --model-config FILE, --model-path DIR "
                         f"(got {len(given)}); models: {', '.join(MODELS.names())}")
    if name:
        spec = MODELS.get(name)
        native = spec.native(seq_len)  # its numbers are all the native module needs: no transformers config
        return ResolvedModel(name=spec.name, task=spec.task, config=spec.shape() if native else spec.config(),
                             layer_class=spec.layer_class, builtin=True, native=native)
    flag = "--model-config" if config_file else "--model-path"
    src = Path(config_file or path)  # type: ignore[arg-type]
    if not src.exists():
        raise UsageError(f"{flag} {src}: no such file or folder")
    if config_file:
        data = read_config_json(src)
        transformers = require_transformers("--model-config")
        try:
            config = transformers.AutoConfig.for_model(**data)
        except Exception as e:  # noqa: BLE001 - transformers' checks of user data raise many kinds (strict
            # dataclass validation among them); each means "this file cannot be a config": one line
            raise UsageError(f"--model-config {src}: transformers {transformers.__version__} cannot build "
                             f"model_type {data['model_type']!r} ({_first_line(e)})") from None
    else:
        if not (src / "config.json").is_file():
            raise UsageError(f"--model-path {src}: no config.json there; give a folder written by "
                             f"save_pretrained (config.json and the weights)")
        read_config_json(src / "config.json", flag="--model-path")
        transformers = require_transformers("--model-path")
        try:
            config = transformers.AutoConfig.from_pretrained(str(src), local_files_only=True)
        except (OSError, ValueError, KeyError) as e:
            raise UsageError(f"--model-path {src}: transformers cannot read its config ({_first_line(e)})") from None
    return ResolvedModel(name=src.stem if config_file else src.name, task=_task_of(config), config=config,
                         layer_class=None, path=str(src) if path else None)


def resolve_shape(*, name: str | None = None, config_file: str | None = None,
                  path: str | None = None) -> ResolvedModel:
    """For the launcher, which builds no model: a built-in model with its numbers only (`config` is its
    shape, a SimpleNamespace), so that the command's own process never imports transformers (and torch)
    for it; the ranks resolve the real config. A config file or weights folder: resolve()."""
    if name and not config_file and not path:
        spec = MODELS.get(name)
        return ResolvedModel(name=spec.name, task=spec.task, config=spec.shape(), layer_class=spec.layer_class,
                             builtin=True)
    return resolve(name=name, config_file=config_file, path=path)


# Sizes a config may set, and the most any real model uses (with room): a larger, negative, zero or
# non-integer one is a damaged file, said before transformers divides by it or builds a 10^30-wide layer.
CONFIG_SIZES = {"hidden_size": 1 << 17, "intermediate_size": 1 << 20, "num_hidden_layers": 1000,
                "num_attention_heads": 1024, "num_key_value_heads": 1024, "vocab_size": 1 << 22,
                "max_position_embeddings": 1 << 24, "head_dim": 1 << 14, "image_size": 1 << 14,
                "patch_size": 1 << 12, "num_channels": 64}


def read_config_json(src: Path, *, flag: str = "--model-config") -> dict[str, Any]:
    """A transformers config file as a dict with a model_type, or a one-line UsageError saying what is wrong."""
    text = read_input(src, what=flag)  # FIFOs, devices and oversize files refused before open
    if "\ufffd" in text or "\x00" in text:  # bytes that are not UTF-8 (read_input replaces them), or NULs
        raise UsageError(f"{flag} {src}: not a text file; give a transformers config JSON")
    try:
        data = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as e:
        raise UsageError(f"{flag} {src}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise UsageError(f"{flag} {src}: nested too deeply to be a transformers config") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise UsageError(f"{flag} {src}: no \"model_type\" field; is it a transformers config?")
    if not isinstance(data["model_type"], str) or not data["model_type"].isprintable():
        raise UsageError(f"{flag} {src}: \"model_type\" must be a name such as \"mistral\"")
    for key, most in CONFIG_SIZES.items():
        v = data.get(key)
        if v is None:
            data.pop(key, None)  # null: transformers' default, as when the key is absent
            continue
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= most:
            raise UsageError(f"{flag} {src}: \"{key}\" is {str(v)[:24]}; give a whole number from 1 to {most:,}")
    return data


def _first_line(e: BaseException) -> str:
    """The first sentence of a library's message (transformers appends lists of every model type)."""
    text = str(e).strip().splitlines()
    return (text[0].split(". ")[0] if text else type(e).__name__)[:200]


def build(model: ResolvedModel, *, meta: bool = False, device: Any = None) -> Any:
    """The torch module: random fp32 weights from the config, or local weights; created on `device`
    (the meta device when `meta`: shapes only)."""
    if model.native:
        return importlib.import_module(model.native).build(model.config, device="meta" if meta else device)
    require_transformers(f"--model {model.name}")
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageClassification

    auto = AutoModelForCausalLM if model.task == CAUSAL_LM else AutoModelForImageClassification
    try:
        if model.path and not meta:
            return auto.from_pretrained(model.path, local_files_only=True, dtype=torch.float32).to(device or "cpu")
        with torch.device("meta" if meta else (device or "cpu")):
            return auto.from_config(model.config, dtype=torch.float32)
    except ValueError as e:  # a model type with no head of this task (e.g. a bare encoder)
        raise UsageError(f"model {model.name}: transformers has no {model.task} model for model_type "
                         f"{getattr(model.config, 'model_type', '?')!r} ({_first_line(e)})") from None


def model_class(model: ResolvedModel) -> Any:
    """The transformers class build() makes: importing it is most of a rank's import time (transformers
    loads a model's modules on first use), so a rank imports it with the rest, not while it builds.
    A native model: its own module (torch only)."""
    if model.native:
        return importlib.import_module(model.native)
    require_transformers(f"--model {model.name}")
    from transformers import AutoModelForCausalLM, AutoModelForImageClassification

    auto = AutoModelForCausalLM if model.task == CAUSAL_LM else AutoModelForImageClassification
    try:
        return auto._model_mapping[type(model.config)]
    except (KeyError, AttributeError):  # build() says what is wrong with it
        return None


def count_params(model: ResolvedModel) -> int:
    """Ψ: by formula for the built-in models (no transformers, instant), else from the config on the meta
    device (no memory, instant even for a 7e9 model)."""
    if model.builtin:
        return MODELS.get(model.name).params()
    return sum(p.numel() for p in build(model, meta=True).parameters())


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What `estimate` needs: no weights, and no transformers for the built-in models."""

    name: str
    task: str
    shape: Any  # hidden_size, num_hidden_layers, patch_size...: a transformers config or a SimpleNamespace
    params: int


def describe(*, name: str | None = None, config_file: str | None = None) -> ModelFacts:
    """A built-in model from its row alone; a config JSON through transformers (which it then needs)."""
    if name and not config_file:
        spec = MODELS.get(name)
        return ModelFacts(name=spec.name, task=spec.task, shape=spec.shape(), params=spec.params())
    resolved = resolve(name=name, config_file=config_file)
    return ModelFacts(name=resolved.name, task=resolved.task, shape=resolved.config, params=count_params(resolved))


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
