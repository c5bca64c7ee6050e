"""transformers' MistralForCausalLM (5.x) in plain PyTorch, for the built-in Mistral-shaped models.

    python3 -m pytest -q tests/unit/test_native_model.py     (names, shapes, loss, logits, gradients against transformers)

Why it exists: importing transformers costs 2-5 s in every process, and every training rank pays it. A rank that
trains a row of models.MODELS builds this model instead; this module must never import transformers, not even
lazily (the test checks it in a fresh process).

It is the same model, not a look-alike: the same parameter names and shapes (a transformers state_dict loads with
strict=True), the same init as PreTrainedModel._init_weights (the same seed gives the same weights), and the same
tensor operations in the same order, so that autocast casts the same tensors: loss, logits and gradients came out
bitwise equal in fp32 and under bf16 autocast, on CPU and on an H100 (20 layers, seq 1024). What it leaves out it
refuses with a ValueError, so that the caller can fall back to transformers: padded batches, sequences longer than
the sliding window, other RoPE types or activations. There is no KV cache, no generation and no gradient
checkpointing.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# MistralConfig's defaults (transformers 5.x, configuration_mistral.py) for the settings a config may leave out;
# transformers 5 keeps rope_theta inside rope_parameters, so both places are read
DEFAULTS: dict[str, Any] = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "initializer_range": 0.02,
                            "sliding_window": 4096, "pad_token_id": None, "hidden_act": "silu",
                            "attention_dropout": 0.0}
IGNORE_INDEX = -100  # ForCausalLMLoss's: labels with this value add nothing to the loss


@dataclass(frozen=True, kw_only=True)
class Shape:
    """The numbers the model is built from: the config's, with DEFAULTS for those it lacks."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int  # None in a config means hidden_size // num_attention_heads, as in MistralAttention
    tie_word_embeddings: bool
    rms_norm_eps: float
    rope_theta: float
    initializer_range: float
    sliding_window: int | None  # None: no window; a longer sequence is refused, not windowed
    pad_token_id: int | None  # the embedding's padding_idx: its row starts at zero and gets no gradient


def shape_of(config: Any) -> Shape:
    """A Shape from any object with MistralConfig's attribute names; ValueError for what this module cannot match."""
    def get(name: str) -> Any:
        return getattr(config, name, DEFAULTS.get(name))

    rope = dict(getattr(config, "rope_parameters", None) or {})
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"rope_type {rope['rope_type']!r}: the native Mistral has only the default RoPE; "
                         "build this config with transformers")
    if get("hidden_act") != "silu" or get("attention_dropout"):
        raise ValueError(f"hidden_act {get('hidden_act')!r}, attention_dropout {get('attention_dropout')}: the native "
                         "Mistral has silu and no attention dropout; build this config with transformers")
    numbers = {k: getattr(config, k) for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                               "num_attention_heads", "num_key_value_heads", "tie_word_embeddings")}
    theta = getattr(config, "rope_theta", None) or rope.get("rope_theta", DEFAULTS["rope_theta"])
    return Shape(**numbers, head_dim=get("head_dim") or config.hidden_size // config.num_attention_heads,
                 rms_norm_eps=get("rms_norm_eps"), rope_theta=theta,
                 initializer_range=get("initializer_range") or DEFAULTS["initializer_range"],  # _init_weights' `or`
                 sliding_window=get("sliding_window"), pad_token_id=get("pad_token_id"))


class CausalLMOutput(OrderedDict):
    """The two fields of transformers' CausalLMOutputWithPast that training reads, `.loss` and `.logits`.

    An OrderedDict, as transformers' ModelOutput is: Accelerate's mixed-precision wrapper copies the tensors of
    a Mapping to fp32 (the logits) and passes other objects through, so the native step costs what the
    transformers step costs; and FSDP's output cast (torch.distributed.utils._apply_to_tensors) rebuilds an
    OrderedDict as its own class but a plain dict as a plain dict, which has no `.loss` (seen on an H100: every
    FSDP rank failed at its first step while it was a dict).
    """

    loss = property(lambda self: self["loss"])
    logits = property(lambda self: self["logits"])


class MistralRMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)  # under autocast an fp32 weight makes the result fp32, as in transformers


class MistralMLP(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class MistralAttention(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.head_dim = s.head_dim
        self.q_proj = nn.Linear(s.hidden_size, s.num_attention_heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, s.num_key_value_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, s.num_key_value_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.num_attention_heads * s.head_dim, s.hidden_size, bias=False)
        self.gqa = s.num_attention_heads != s.num_key_value_heads

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        heads = (*x.shape[:-1], -1, self.head_dim)
        q = self.q_proj(x).view(heads).transpose(1, 2)
        k = self.k_proj(x).view(heads).transpose(1, 2)
        v = self.v_proj(x).view(heads).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        # transformers' SDPA path without a mask: is_causal, and enable_gqa rather than repeated k/v heads
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.head_dim**-0.5, enable_gqa=self.gqa)
        return self.o_proj(out.transpose(1, 2).contiguous().reshape(*x.shape[:-1], -1).contiguous())


class MistralDecoderLayer(nn.Module):
    """The block; FSDP's auto-wrap and Accelerate find it by this class name (models.MODELS' layer_class)."""

    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.self_attn = MistralAttention(s)
        self.mlp = MistralMLP(s)
        self.input_layernorm = MistralRMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = MistralRMSNorm(s.hidden_size, s.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class MistralRotaryEmbedding(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        # computed on the CPU, where from_config computes it before the model is moved: CUDA's pow differs by an ulp,
        # which moves bf16 logits by ~0.1 at seq 1024 (seen on an H100)
        exponents = torch.arange(0, s.head_dim, 2, dtype=torch.float, device="cpu") / s.head_dim
        inv_freq = (1.0 / s.rope_theta**exponents).to(torch.get_default_device())
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not in state_dict, as in transformers
        # transformers keeps this copy too (for dynamic RoPE); DDP broadcasts every buffer each forward, so
        # the same buffers make the same traffic as the transformers model
        self.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(x.shape[1], device=x.device)[None, :, None].float()
        freqs = positions * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class MistralModel(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab_size, s.hidden_size, s.pad_token_id)
        self.layers = nn.ModuleList(MistralDecoderLayer(s) for _ in range(s.num_hidden_layers))
        self.norm = MistralRMSNorm(s.hidden_size, s.rms_norm_eps)
        self.rotary_emb = MistralRotaryEmbedding(s)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(x)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


def _init(module: nn.Module, std: float) -> None:
    """PreTrainedModel._init_weights on every submodule (a no-op on "meta")."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, std)
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                m.weight[m.padding_idx].zero_()
            elif isinstance(m, MistralRMSNorm):
                m.weight.fill_(1.0)


class MistralForCausalLM(nn.Module):
    _no_split_modules = ["MistralDecoderLayer"]  # read by Accelerate and models.block_class_names

    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.shape = s
        # transformers makes and initialises the body, then makes and initialises the head, then ties: done in the
        # same order, the same torch.manual_seed gives the same weights as MistralForCausalLM(config)
        self.model = MistralModel(s)
        _init(self.model, s.initializer_range)
        self.lm_head = nn.Linear(s.hidden_size, s.vocab_size, bias=False)
        _init(self.lm_head, s.initializer_range)
        if s.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    # PreTrainedModel's accessors: Accelerate's FSDP2 carves the input embeddings and the tail (final norm,
    # head) into units of their own through them, so the native model is gathered as transformers' is
    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, **ignored: Any) -> CausalLMOutput:
        """Like MistralForCausalLM.forward without cache; other transformers arguments (use_cache...) are ignored."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("attention_mask has zeros: padded batches need the transformers model "
                             "(the native Mistral attends to every token, causally)")
        window = self.shape.sliding_window
        if window is not None and input_ids.shape[1] > window:
            raise ValueError(f"sequence of {input_ids.shape[1]} tokens is longer than sliding_window {window}: "
                             "the native Mistral has no sliding-window attention; use the transformers model")
        logits = self.lm_head(self.model(input_ids))
        loss = None
        if labels is not None:  # ForCausalLMLoss: fp32 logits, labels shifted left, mean over the counted tokens
            shifted = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:].reshape(-1).to(logits.device)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), shifted, ignore_index=IGNORE_INDEX)
        return CausalLMOutput(loss=loss, logits=logits)


def build(config: Any, *, device: str | torch.device | None = None) -> MistralForCausalLM:
    """The model in fp32 on `device` (parameters made there; "meta" allocates nothing), initialised as transformers."""
    shape = shape_of(config)  # before any allocation: a config this model cannot match fails first
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return MistralForCausalLM(shape).float()  # fp32 whatever torch's default dtype, as from_config(dtype=fp32)
