"""The native Mistral (training/native.py) is transformers' MistralForCausalLM: names, init, loss, gradients.

    python3 -m pytest -q tests/unit/test_native_model.py
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from fabricbench.training import models, native

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=512)
# the plain shape, head_dim wider than hidden_size // heads with a padding row, and a tied head
VARIANTS = {"plain": {}, "head_dim": {"head_dim": 32, "pad_token_id": 0}, "tied": {"tie_word_embeddings": True}}


def _config(**extra) -> SimpleNamespace:
    """What models.ModelSpec.shape() gives: MistralConfig's attribute names, no transformers."""
    return SimpleNamespace(**{"head_dim": None, "tie_word_embeddings": False, **TINY, **extra})


def _hf(**extra):
    transformers = pytest.importorskip("transformers", reason="the comparison needs transformers (the train extra)")
    return transformers.MistralForCausalLM(transformers.MistralConfig(**TINY, **extra)).float()


def _shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def _step(model, ids, labels, autocast: bool = False):
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_names_and_shapes_are_transformers(variant):
    hf, ours = _hf(**VARIANTS[variant]), native.build(_config(**VARIANTS[variant]))
    assert _shapes(ours) == _shapes(hf)
    assert (ours.lm_head.weight is ours.model.embed_tokens.weight) == (variant == "tied")
    assert type(ours.model.layers[0]).__name__ == "MistralDecoderLayer"
    assert ours._no_split_modules == ["MistralDecoderLayer"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_seed_same_weights(variant):
    """Built in transformers' order, a seed gives the same weights, so switching models does not move a run."""
    torch.manual_seed(7)
    hf = _hf(**VARIANTS[variant])
    torch.manual_seed(7)
    ours = native.build(_config(**VARIANTS[variant]))
    theirs = hf.state_dict()
    for name, value in ours.state_dict().items():
        assert torch.equal(value, theirs[name]), name


@pytest.mark.parametrize("variant", VARIANTS)
def test_loss_logits_and_gradients_equal_transformers(variant):
    hf = _hf(**VARIANTS[variant])
    ours = native.build(hf.config)  # a transformers config works too (rope_theta inside rope_parameters)
    ours.load_state_dict(hf.state_dict(), strict=True)
    ids = torch.randint(0, TINY["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[1, :9] = -100  # ignored tokens leave the mean, as in ForCausalLMLoss
    for lab in (ids, labels):
        (a, ga), (b, gb) = _step(hf, ids, lab), _step(ours, ids, lab)
        assert b.loss.item() == pytest.approx(a.loss.item(), rel=1e-5)
        torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=1e-5)
        assert ga.keys() == gb.keys()
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-4, atol=1e-6, msg=name)
    if variant == "head_dim":  # the padding row gets no gradient, as nn.Embedding(padding_idx) in transformers
        assert not gb["model.embed_tokens.weight"][0].any() and not ga["model.embed_tokens.weight"][0].any()
    (a, _), (b, _) = _step(hf, ids, ids, autocast=True), _step(ours, ids, ids, autocast=True)
    assert b.logits.dtype == a.logits.dtype == torch.bfloat16
    assert b.loss.item() == pytest.approx(a.loss.item(), rel=1e-2)


def test_init_statistics_and_parameter_count_of_lab_mistral():
    spec = models.MODELS.get("lab-mistral")
    model = native.build(spec.shape())
    assert sum(p.numel() for p in model.parameters()) == spec.params()
    assert all(p.dtype == torch.float32 for p in model.parameters())
    layer = model.model.layers[1]
    for w in (layer.self_attn.q_proj.weight, layer.mlp.down_proj.weight, model.model.embed_tokens.weight):
        assert w.std().item() == pytest.approx(0.02, rel=0.1) and abs(w.mean().item()) < 0.002
    norms = [layer.input_layernorm.weight, layer.post_attention_layernorm.weight, model.model.norm.weight]
    assert all(bool((w == 1).all()) for w in norms)
    wide = native.build(SimpleNamespace(**vars(spec.shape()), initializer_range=0.05))
    assert wide.model.layers[0].mlp.up_proj.weight.std().item() == pytest.approx(0.05, rel=0.1)


def test_what_it_cannot_match_is_refused():
    model = native.build(_config(sliding_window=16))
    ids = torch.randint(0, TINY["vocab_size"], (1, 17))
    with pytest.raises(ValueError, match="17 tokens is longer than sliding_window 16"):
        model(input_ids=ids)
    assert model(input_ids=ids[:, :16], labels=ids[:, :16]).loss.item() > 0  # the window itself is fine
    mask = torch.ones_like(ids[:, :16])
    assert model(input_ids=ids[:, :16], attention_mask=mask).loss is None
    mask[0, 0] = 0
    with pytest.raises(ValueError, match="padded batches need the transformers model"):
        model(input_ids=ids[:, :16], attention_mask=mask)
    with pytest.raises(ValueError, match="rope_type 'linear'"):
        native.build(_config(rope_parameters={"rope_type": "linear", "factor": 2.0}))
    with pytest.raises(ValueError, match="hidden_act 'gelu'"):
        native.build(_config(hidden_act="gelu"))


def test_importing_it_imports_no_transformers():
    code = "import sys, fabricbench.training.native; assert 'transformers' not in sys.modules, 'transformers imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]


def test_meta_device_counts_without_allocating():
    spec = models.MODELS.get("mistral-7b")  # 7.2e9 parameters: 29 GB if anything were allocated
    model = native.build(spec.shape(), device="meta")
    assert all(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert sum(p.numel() for p in model.parameters()) == spec.params() == 7_241_732_096


def test_the_output_keeps_loss_and_logits_through_the_wrappers_casts():
    """FSDP casts a forward's outputs with _apply_to_tensors and Accelerate's mixed precision with
    convert_to_fp32: each rebuilds the container, and the step then reads `.loss` from what comes back."""
    from accelerate.utils import convert_to_fp32
    from torch.distributed.utils import _apply_to_tensors

    bf16 = torch.bfloat16
    out = native.CausalLMOutput(loss=torch.tensor(1.5, dtype=bf16), logits=torch.ones(2, dtype=bf16))
    cast = _apply_to_tensors(lambda t: t.float(), out)
    assert cast.loss.dtype == torch.float32 and cast.logits.dtype == torch.float32
    assert float(convert_to_fp32(out).loss) == 1.5
