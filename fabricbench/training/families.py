"""Model families by their config numbers alone: Ψ by formula, the task, the block class, and whether
fabricbench's own module builds it; no torch, no transformers.

    fabricbench estimate --model-config llama-1b.json --gpus 4     (Ψ from the file's numbers, well under 1 s)
    python3 -m pytest -q tests/unit/test_families.py                    (every formula against the meta-device count)

A transformers config file names its family in `model_type`. For the families below the count of
parameters that transformers' AutoModelForCausalLM / AutoModelForImageClassification builds from the
file is a formula of its numbers (each formula's docstring lists what it counts, from the family's
modeling code in transformers 5.x), so the command's own process needs neither torch nor transformers
for a config file: 5-10 s of every run's start on a GPU machine. A family not listed here, or a setting
a formula does not cover (cross-attention, a SwiGLU DINOv2), has no formula (`facts` returns None): the
ranks count Ψ on the model they build and report it back.

Defaults are the family's config class's (tests/unit/test_families.py checks them against transformers), used
for a number the file leaves out, as transformers would.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

CAUSAL_LM = "causal-lm"
IMAGE_CLS = "image-cls"

NATIVE = "fabricbench.training.native"  # its MistralForCausalLM: Mistral, and Llama without biases


@dataclass(frozen=True, kw_only=True)
class Family:
    """One `model_type`: its config class in transformers, that class's defaults, Ψ as a formula of the
    numbers, the transformer block FSDP wraps, and the names the config class maps onto the common ones
    (GPT-2's n_embd is hidden_size)."""

    config_class: str
    defaults: dict[str, Any]
    params: Callable[[SimpleNamespace], int]
    layer_class: str
    aliases: dict[str, str] | None = None  # common name -> this family's name (transformers' attribute_map)
    covers: Callable[[SimpleNamespace], str | None] = lambda c: None  # why the formula does not fit; None: it does
    native: str | None = None  # fabricbench's own module builds it (when native_fits), without transformers


def _head_dim(c: SimpleNamespace) -> int:
    return getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads


def _kv_heads(c: SimpleNamespace) -> int:
    return getattr(c, "num_key_value_heads", None) or c.num_attention_heads


def _decoder_params(c: SimpleNamespace, *, qkv_bias: bool, o_bias: bool, mlp_bias: bool) -> int:
    """Llama-shaped causal LMs (Llama, Mistral, Qwen2): embeddings; per layer q/k/v/o projections (GQA: k and v
    have num_key_value_heads heads of head_dim), a gated MLP of three matrices, two RMSNorms; the final RMSNorm;
    an LM head unless tied to the embeddings."""
    h, inter, d = c.hidden_size, c.intermediate_size, _head_dim(c)
    q, kv = c.num_attention_heads * d, _kv_heads(c) * d
    attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if qkv_bias else 0) + (h if o_bias else 0)
    mlp = 3 * h * inter + (2 * inter + h if mlp_bias else 0)
    head = 0 if c.tie_word_embeddings else c.vocab_size * h
    return c.vocab_size * h + c.num_hidden_layers * (attn + mlp + 2 * h) + h + head


def _llama_params(c: SimpleNamespace) -> int:
    """LlamaForCausalLM: q/k/v/o biased when attention_bias, the MLP's three when mlp_bias."""
    return _decoder_params(c, qkv_bias=bool(c.attention_bias), o_bias=bool(c.attention_bias),
                           mlp_bias=bool(c.mlp_bias))


def _mistral_params(c: SimpleNamespace) -> int:
    """MistralForCausalLM: no bias anywhere."""
    return _decoder_params(c, qkv_bias=False, o_bias=False, mlp_bias=False)


def _qwen2_params(c: SimpleNamespace) -> int:
    """Qwen2ForCausalLM: q, k and v biased, o and the MLP not."""
    return _decoder_params(c, qkv_bias=True, o_bias=False, mlp_bias=False)


def _gpt2_params(c: SimpleNamespace) -> int:
    """GPT2LMHeadModel: token and position embeddings; per block two LayerNorms, c_attn (h -> 3h) and c_proj
    with biases, an MLP of n_inner (4h when null) with biases; the final LayerNorm; an LM head unless tied."""
    h = c.hidden_size
    inner = c.n_inner or 4 * h
    block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
    head = 0 if c.tie_word_embeddings else c.vocab_size * h
    return c.vocab_size * h + c.max_position_embeddings * h + c.num_hidden_layers * block + 2 * h + head


def _gpt_neox_params(c: SimpleNamespace) -> int:
    """GPTNeoXForCausalLM: embed_in; per layer two LayerNorms, query_key_value (h -> 3h) and dense, biased when
    attention_bias, an MLP h -> intermediate -> h with biases; the final LayerNorm; embed_out unless tied."""
    h, inter = c.hidden_size, c.intermediate_size
    attn = 3 * h * h + h * h + (4 * h if c.attention_bias else 0)
    layer = 2 * 2 * h + attn + (h * inter + inter) + (inter * h + h)
    head = 0 if c.tie_word_embeddings else c.vocab_size * h
    return c.vocab_size * h + c.num_hidden_layers * layer + 2 * h + head


def _bert_params(c: SimpleNamespace) -> int:
    """BertLMHeadModel / RobertaForCausalLM (no pooler): word, position and token-type embeddings and a
    LayerNorm; per layer q/k/v/o with biases, two LayerNorms, an MLP with biases; the LM head's transform
    (dense + LayerNorm), its decoder (tied to the word embeddings unless untied) and the head's bias (the
    decoder's bias is that same tensor only while tied)."""
    h, inter, v = c.hidden_size, c.intermediate_size, c.vocab_size
    embed = v * h + c.max_position_embeddings * h + c.type_vocab_size * h + 2 * h
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * inter + inter) + (inter * h + h)
    head = (h * h + h) + 2 * h + v + (0 if c.tie_word_embeddings else v * h + v)  # untied: the decoder's own bias too
    return embed + c.num_hidden_layers * layer + head


def _patches(c: SimpleNamespace) -> int:
    return (c.image_size // c.patch_size) ** 2


def _vit_params(c: SimpleNamespace) -> int:
    """ViTForImageClassification (no pooler, no mask token): patch convolution with bias, the CLS token,
    position embeddings for the patches and CLS; per layer two LayerNorms, q/k/v (biased when qkv_bias) and
    o with bias, an MLP with biases; the final LayerNorm; a classifier on [CLS]."""
    h, inter, p = c.hidden_size, c.intermediate_size, c.patch_size
    embed = h * c.num_channels * p * p + h + h + (_patches(c) + 1) * h
    layer = 2 * 2 * h + 3 * h * h + (3 * h if c.qkv_bias else 0) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    return embed + c.num_hidden_layers * layer + 2 * h + h * c.num_labels + c.num_labels


def _dinov2_params(c: SimpleNamespace) -> int:
    """Dinov2ForImageClassification: patch convolution with bias, CLS token, the mask token (when
    use_mask_token), position embeddings; per layer two LayerNorms, q/k/v (biased when qkv_bias) and o with
    bias, two layer scales, an MLP of mlp_ratio·h with biases; the final LayerNorm; a classifier on
    [CLS ; mean of patches] (2h inputs)."""
    h, p = c.hidden_size, c.patch_size
    mlp = int(h * c.mlp_ratio)
    embed = h * c.num_channels * p * p + h + h + (h if c.use_mask_token else 0) + (_patches(c) + 1) * h
    layer = (2 * 2 * h + 3 * h * h + (3 * h if c.qkv_bias else 0) + (h * h + h) + 2 * h + (h * mlp + mlp)
             + (mlp * h + h))
    return embed + c.num_hidden_layers * layer + 2 * h + 2 * h * c.num_labels + c.num_labels


def _no_cross_attention(c: SimpleNamespace) -> str | None:
    return "add_cross_attention is set (cross-attention layers)" if getattr(c, "add_cross_attention", False) else None


def _no_swiglu(c: SimpleNamespace) -> str | None:
    return "use_swiglu_ffn is set (a SwiGLU MLP)" if getattr(c, "use_swiglu_ffn", False) else None


_LM = dict(tie_word_embeddings=False, head_dim=None, num_key_value_heads=None)
FAMILIES: dict[str, Family] = {
    "llama": Family(config_class="LlamaConfig", params=_llama_params, layer_class="LlamaDecoderLayer", native=NATIVE,
                    defaults=dict(_LM, vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                  num_hidden_layers=32, num_attention_heads=32, max_position_embeddings=2048,
                                  attention_bias=False, mlp_bias=False)),
    "mistral": Family(config_class="MistralConfig", params=_mistral_params, layer_class="MistralDecoderLayer",
                      native=NATIVE, defaults=dict(_LM, vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                                   num_hidden_layers=32, num_attention_heads=32,
                                                   num_key_value_heads=8, max_position_embeddings=131072,
                                                   sliding_window=4096)),
    "qwen2": Family(config_class="Qwen2Config", params=_qwen2_params, layer_class="Qwen2DecoderLayer",
                    defaults=dict(_LM, vocab_size=151936, hidden_size=4096, intermediate_size=22016,
                                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                                  max_position_embeddings=32768)),
    "gpt2": Family(config_class="GPT2Config", params=_gpt2_params, layer_class="GPT2Block", covers=_no_cross_attention,
                   aliases={"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                            "max_position_embeddings": "n_positions"},
                   defaults=dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024, n_inner=None,
                                 tie_word_embeddings=True)),
    "gpt_neox": Family(config_class="GPTNeoXConfig", params=_gpt_neox_params, layer_class="GPTNeoXLayer",
                       defaults=dict(vocab_size=50432, hidden_size=6144, intermediate_size=24576, num_hidden_layers=44,
                                     num_attention_heads=64, max_position_embeddings=2048, attention_bias=True,
                                     tie_word_embeddings=False)),
    "bert": Family(config_class="BertConfig", params=_bert_params, layer_class="BertLayer", covers=_no_cross_attention,
                   defaults=dict(vocab_size=30522, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                 num_attention_heads=12, max_position_embeddings=512, type_vocab_size=2,
                                 tie_word_embeddings=True)),
    "roberta": Family(config_class="RobertaConfig", params=_bert_params, layer_class="RobertaLayer",
                      covers=_no_cross_attention,
                      defaults=dict(vocab_size=50265, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                    num_attention_heads=12, max_position_embeddings=512, type_vocab_size=2,
                                    tie_word_embeddings=True)),
    "vit": Family(config_class="ViTConfig", params=_vit_params, layer_class="ViTLayer",
                  defaults=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                                image_size=224, patch_size=16, num_channels=3, qkv_bias=True, num_labels=2)),
    "dinov2": Family(config_class="Dinov2Config", params=_dinov2_params, layer_class="Dinov2Layer", covers=_no_swiglu,
                     defaults=dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4,
                                   image_size=224, patch_size=14, num_channels=3, num_labels=2, qkv_bias=True,
                                   use_mask_token=True, use_swiglu_ffn=False)),
}


def task_of(data: dict[str, Any] | Any) -> str:
    """The task a config trains: image classification when its architectures say so or it has an image
    size, else a causal LM (a dict or a config object alike)."""
    get = data.get if isinstance(data, dict) else (lambda k, d=None: getattr(data, k, d))
    archs = " ".join(get("architectures", None) or [])
    return IMAGE_CLS if "ImageClassification" in archs or get("image_size", None) is not None else CAUSAL_LM


def shape(model_type: str, data: dict[str, Any]) -> SimpleNamespace:
    """The family's defaults with the file's numbers, under the common names as well (hidden_size ...) and
    num_labels counted as transformers counts it (from id2label where the file gives that)."""
    fam = FAMILIES[model_type]
    numbers = {**fam.defaults, **{k: v for k, v in data.items() if v is not None or k not in fam.defaults}}
    if "num_labels" not in data and isinstance(data.get("id2label"), dict):
        numbers["num_labels"] = len(data["id2label"])
    numbers.setdefault("num_labels", 2)  # PretrainedConfig's
    for common, own in (fam.aliases or {}).items():
        if common in data and own not in data:
            numbers[own] = data[common]  # transformers' attribute_map sets the family's own name
        numbers[common] = numbers[own]
    if numbers.get("num_key_value_heads") is None and "num_attention_heads" in numbers:
        numbers["num_key_value_heads"] = numbers["num_attention_heads"]  # the config classes' own rule
    return SimpleNamespace(**numbers)


@dataclass(frozen=True, kw_only=True)
class ConfigFacts:
    """What a config file's numbers say without torch or transformers."""

    model_type: str
    task: str
    params: int
    layer_class: str
    shape: SimpleNamespace


def facts(data: dict[str, Any]) -> ConfigFacts | None:
    """Ψ, task and block class of a config dict (models.read_config_json's); None where no formula fits
    (a family not listed, or a setting its formula does not cover): then the ranks count Ψ."""
    fam = FAMILIES.get(data.get("model_type"))
    if fam is None:
        return None
    s = shape(data["model_type"], data)
    if fam.covers(s) is not None or not _consistent(s):
        return None
    try:
        psi = fam.params(s)
    except (TypeError, AttributeError, ZeroDivisionError):  # a number of the wrong kind: transformers says
        return None
    if not isinstance(psi, int) or psi <= 0:
        return None
    return ConfigFacts(model_type=data["model_type"], task=task_of(s), params=psi, layer_class=fam.layer_class,
                       shape=s)


def _consistent(s: SimpleNamespace) -> bool:
    """Heads that divide the width (where no head_dim is given) and the KV heads: a file that breaks either is
    left to transformers, whose checks say what is wrong with it, rather than counted here."""
    heads, width = getattr(s, "num_attention_heads", None), getattr(s, "hidden_size", None)
    if not isinstance(heads, int) or not isinstance(width, int) or heads < 1:
        return False
    if getattr(s, "head_dim", None) is None and width % heads:
        return False
    kv = getattr(s, "num_key_value_heads", None)
    return kv is None or (isinstance(kv, int) and kv >= 1 and heads % kv == 0)


def native_fits(model_type: str, s: SimpleNamespace, seq_len: int | None) -> str | None:
    """fabricbench's own module for this config at `seq_len`, where it builds the same model as transformers;
    None: transformers builds it. The native Mistral is Llama's structure without biases (the same parameter
    names and operations), attending causally over the whole sequence: a Mistral sliding window only while the
    sequence fits in it; only the default RoPE, silu, no attention dropout (native.shape_of refuses the rest)."""
    fam = FAMILIES.get(model_type)
    if fam is None or fam.native is None:
        return None
    if getattr(s, "attention_bias", False) or getattr(s, "mlp_bias", False):
        return None
    rope = {**(getattr(s, "rope_parameters", None) or {}), **(getattr(s, "rope_scaling", None) or {})}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        return None
    if getattr(s, "hidden_act", "silu") != "silu" or getattr(s, "attention_dropout", 0.0):
        return None
    if getattr(s, "pretraining_tp", 1) not in (None, 1):
        return None
    window = getattr(s, "sliding_window", None)
    if window is not None and seq_len is not None and seq_len > window:
        return None
    return fam.native
