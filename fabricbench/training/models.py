"""Models built from configs, randomly initialised, never downloaded.

    fabricbench estimate --model mistral-7b --gpus 4      (7.24e9 parameters, by formula, in well under 2 s)

Each named model is one row of MODELS: its task ("causal-lm" or "image-cls"), its family (families.py: the
transformers config class, that class's defaults and Ψ as a formula of the config numbers) and the settings
that differ from the family's defaults. `--model-config FILE` reads any transformers config JSON (the task
follows from its `architectures`, or from an image size); a file of a family in families.py needs no
transformers until a rank builds it, any other family transformers to read it. A Mistral or bias-free Llama
(a built-in row or a file) is trained with fabricbench's own module (training/native.py: the same
parameters, the same numbers, no transformers to import), any other from the transformers config of the
same numbers. `--model-path DIR` loads local pretrained weights (transformers, the `train` extra).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import read_input
from fabricbench.registry import Registry
from fabricbench.training import families
from fabricbench.training.families import CAUSAL_LM, FAMILIES, IMAGE_CLS, facts, native_fits, task_of

FOOD101_CLASSES = 101  # the reference study fine-tunes DINOv2 on Food-101


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
        return families.shape(self.family, self.settings)

    def params(self) -> int:
        """Ψ from the numbers alone, equal to counting the built model (tests/cli/test_estimate.py)."""
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
    params: int | None = None  # Ψ by formula (a built-in row, or a config of a family in families.py);
    # None: counted on the built model
    native: str | None = None  # the module that builds it without transformers (Family.native); config is
    # then the numbers (a SimpleNamespace), not a transformers config

    @property
    def impl(self) -> str:
        """Who builds the model, for the record: "fabricbench" (its own module) or "transformers"."""
        return "fabricbench" if self.native else "transformers"


def resolve(*, name: str | None = None, config_file: str | None = None, path: str | None = None,
            seq_len: int | None = None) -> ResolvedModel:
    """Exactly one of a registered name, a config JSON or a weights folder. A built-in row or a config file
    that fabricbench builds itself (families.native_fits; at `seq_len`, where given) resolves without
    transformers."""
    _one_of(name, config_file, path)
    if name:
        spec = MODELS.get(name)
        native = spec.native(seq_len)  # its numbers are all the native module needs: no transformers config
        return ResolvedModel(name=spec.name, task=spec.task, config=spec.shape() if native else spec.config(),
                             layer_class=spec.layer_class, params=spec.params(), native=native)
    flag = "--model-config" if config_file else "--model-path"
    src = _existing(flag, config_file or path)
    if config_file:
        data = read_config_json(src)
        known = facts(data)
        native = known and native_fits(known.model_type, known.shape, seq_len)
        if native:  # the native module's numbers: a Llama has no window (the native Mistral's default has one)
            numbers = SimpleNamespace(**{"sliding_window": None, **vars(known.shape)})
            return ResolvedModel(name=src.stem, task=known.task, config=numbers, layer_class=None,
                                 params=known.params, native=native)
        config = _transformers_config(src, data)
        return ResolvedModel(name=src.stem, task=task_of(config), config=config, layer_class=None,
                             params=known.params if known else None)
    if not (src / "config.json").is_file():
        raise UsageError(f"--model-path {src}: no config.json there; give a folder written by "
                         f"save_pretrained (config.json and the weights)")
    read_config_json(src / "config.json", flag="--model-path")
    transformers = require_transformers("--model-path")
    try:
        config = transformers.AutoConfig.from_pretrained(str(src), local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(f"--model-path {src}: transformers cannot read its config ({_first_line(e)})") from None
    return ResolvedModel(name=src.name, task=task_of(config), config=config, layer_class=None, path=str(src))


def _one_of(name: str | None, config_file: str | None, path: str | None) -> None:
    given = [x for x in (name, config_file, path) if x]
    if len(given) != 1:
        raise UsageError("name exactly one of --model NAME, --model-config FILE, --model-path DIR "
                         f"(got {len(given)}); models: {', '.join(MODELS.names())}")


def _existing(flag: str, where: str) -> Path:
    src = Path(where)
    if not src.exists():
        raise UsageError(f"{flag} {src}: no such file or folder")
    return src


def _transformers_config(src: Path, data: dict[str, Any]) -> Any:
    transformers = require_transformers("--model-config")
    try:
        return transformers.AutoConfig.for_model(**data)
    except Exception as e:  # noqa: BLE001 - transformers' checks of user data raise many kinds (strict
        # dataclass validation among them); each means "this file cannot be a config": one line
        raise UsageError(f"--model-config {src}: transformers {transformers.__version__} cannot build "
                         f"model_type {data['model_type']!r} ({_first_line(e)})") from None


def resolve_shape(*, name: str | None = None, config_file: str | None = None,
                  path: str | None = None) -> ResolvedModel:
    """For the launcher, which builds no model: the numbers only (`config` is a SimpleNamespace) for a
    built-in model and for a config file of a family with a formula (families.py), so that the command's
    own process imports neither transformers nor torch for them; the ranks resolve the real config. A
    config of another family, or a weights folder: resolve() (transformers reads it; Ψ is left to the
    ranks, which build the model anyway)."""
    _one_of(name, config_file, path)
    if name:
        spec = MODELS.get(name)
        return ResolvedModel(name=spec.name, task=spec.task, config=spec.shape(), layer_class=spec.layer_class,
                             params=spec.params())
    if config_file:
        src = _existing("--model-config", config_file)
        known = facts(read_config_json(src))
        if known is not None:
            return ResolvedModel(name=src.stem, task=known.task, config=known.shape, layer_class=known.layer_class,
                                 params=known.params)
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
    """Ψ: by formula where there is one (no transformers, instant), else from the config on the meta
    device (no memory, instant even for a 7e9 model, but torch and transformers to import)."""
    if model.params is not None:
        return model.params
    return sum(p.numel() for p in build(model, meta=True).parameters())


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What `estimate` needs: no weights, and no transformers for the built-in models."""

    name: str
    task: str
    shape: Any  # hidden_size, num_hidden_layers, patch_size...: a transformers config or a SimpleNamespace
    params: int


def describe(*, name: str | None = None, config_file: str | None = None) -> ModelFacts:
    """A built-in model from its row alone, a config JSON of a family with a formula from its numbers; a
    config of another family through transformers (which it then needs) and the meta device."""
    resolved = resolve_shape(name=name, config_file=config_file)
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
