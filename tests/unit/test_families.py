"""Ψ, task and block class of a config file by formula (training/families.py), checked against what
transformers builds; a bias-free Llama built by the native module is transformers' LlamaForCausalLM.

    python3 -m pytest -q tests/unit/test_families.py
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fabricbench.training import families, models

transformers = pytest.importorskip("transformers", reason="the formulas are checked against transformers")
torch = pytest.importorskip("torch")

_LM = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4, vocab_size=300)
_ENC = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=300)
_IMG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8)
# several shapes per family: GQA and MQA, tied and untied heads, biases on and off, head_dim apart from
# hidden/heads, the family's own names (GPT-2's n_embd) and the common ones, labels by count or by id2label
SHAPES = {
    "llama": [dict(_LM, num_key_value_heads=2), dict(_LM, num_hidden_layers=3, tie_word_embeddings=True),
              dict(_LM, attention_bias=True, mlp_bias=True, head_dim=32), dict(_LM, num_key_value_heads=1)],
    "mistral": [dict(_LM, num_key_value_heads=1, tie_word_embeddings=True), dict(_LM, head_dim=8, num_key_value_heads=2),
                dict(_LM, num_key_value_heads=4)],
    "qwen2": [dict(_LM, num_attention_heads=8, num_key_value_heads=2),
              dict(_LM, tie_word_embeddings=True, num_key_value_heads=4),
              dict(_LM, num_key_value_heads=1, num_hidden_layers=3)],
    "gpt2": [dict(n_embd=64, n_layer=2, n_head=4, vocab_size=300, n_positions=128),
             dict(hidden_size=64, num_hidden_layers=3, n_head=4, vocab_size=300, n_positions=96, n_inner=100,
                  tie_word_embeddings=False)],
    "gpt_neox": [dict(_LM, intermediate_size=256), dict(_LM, attention_bias=False, tie_word_embeddings=True),
                 dict(_LM, max_position_embeddings=64, num_hidden_layers=3)],
    "bert": [dict(_ENC), dict(_ENC, tie_word_embeddings=False, type_vocab_size=1),
             dict(_ENC, max_position_embeddings=100, num_hidden_layers=3)],
    "roberta": [dict(_ENC, max_position_embeddings=130), dict(_ENC, tie_word_embeddings=False)],
    "vit": [dict(_IMG, intermediate_size=128, num_labels=101), dict(_IMG, intermediate_size=96, patch_size=4,
                                                                    qkv_bias=False, num_channels=1)],
    "dinov2": [dict(_IMG, num_labels=10), dict(_IMG, image_size=28, patch_size=7, qkv_bias=False, mlp_ratio=3,
                                              id2label={"0": "a", "1": "b", "2": "c"}),
               dict(_IMG, use_mask_token=False)],
}
CASES = [(family, i, shape) for family, shapes in SHAPES.items() for i, shape in enumerate(shapes)]


def _built(data: dict) -> torch.nn.Module:
    """What a rank builds from the file: transformers' model of its task, on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageClassification

    config = AutoConfig.for_model(**data)
    auto = AutoModelForImageClassification if families.task_of(config) == families.IMAGE_CLS else AutoModelForCausalLM
    with torch.device("meta"):
        return auto.from_config(config)


def test_every_family_has_shapes():
    assert set(SHAPES) == set(families.FAMILIES)


@pytest.mark.parametrize("family,i,shape", CASES, ids=[f"{f}-{i}" for f, i, _ in CASES])
def test_formula_equals_the_meta_device_count(family, i, shape):
    data = {"model_type": family, **shape}
    known = families.facts(data)
    model = _built(data)
    assert known is not None
    assert known.params == sum(p.numel() for p in model.parameters())
    assert known.layer_class in model._no_split_modules
    assert known.task == (families.IMAGE_CLS if "image_size" in shape else families.CAUSAL_LM)


@pytest.mark.parametrize("family", sorted(families.FAMILIES))
def test_defaults_are_the_config_classes(family):
    fam = families.FAMILIES[family]
    config = getattr(transformers, fam.config_class)()
    for key, value in fam.defaults.items():
        have = getattr(config, key, None)  # Qwen2Config has no head_dim: its attention uses hidden/heads
        # the config classes fill these in from others; a file that leaves them out gets the same rule here
        derived = key in ("head_dim", "num_key_value_heads") and value is None
        assert have == value or derived, (fam.config_class, key, have, value)
    # and a file that gives nothing but its family counts as transformers' defaults do (small families only)
    if family in ("gpt2", "bert", "roberta", "vit", "dinov2"):
        assert families.facts({"model_type": family}).params == sum(
            p.numel() for p in _built({"model_type": family}).parameters())


@pytest.mark.parametrize("data", [{"model_type": "gptj"}, {"model_type": "gpt2", "add_cross_attention": True},
                                  {"model_type": "dinov2", "use_swiglu_ffn": True},
                                  {"model_type": "llama", "num_attention_heads": 3},
                                  {"model_type": "qwen2", "num_key_value_heads": 5},
                                  {"model_type": "bert", "type_vocab_size": -10**9}],
                         ids=["gptj", "cross", "swiglu", "heads", "kv-heads", "negative"])
def test_no_formula_where_it_would_not_fit(data):
    """Another family, a setting the formula leaves out, or numbers that do not make a model: no figure (the
    ranks count Ψ; transformers says what is wrong with a broken file) rather than a wrong one."""
    assert families.facts(data) is None


LLAMA = dict(model_type="llama", vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)


@pytest.mark.parametrize("extra", [{}, {"tie_word_embeddings": True, "rms_norm_eps": 1e-5},
                                   {"head_dim": 32, "rope_theta": 500000.0}], ids=["plain", "tied", "head_dim"])
def test_native_llama_is_transformers_llama(tmp_path, extra):
    """A bias-free Llama file is trained with the native module: the same weights from the same seed, the same
    loss and gradients as transformers' LlamaForCausalLM."""
    path = tmp_path / "llama.json"
    path.write_text(json.dumps({**LLAMA, **extra}))
    resolved = models.resolve(config_file=str(path), seq_len=64)
    assert resolved.impl == "fabricbench" and resolved.params == families.facts({**LLAMA, **extra}).params
    torch.manual_seed(3)
    mine = models.build(resolved)
    torch.manual_seed(3)
    theirs = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**LLAMA, **extra),
                                                           dtype=torch.float32)
    assert {n: p.shape for n, p in mine.named_parameters()} == {n: p.shape for n, p in theirs.named_parameters()}
    for (n, a), b in zip(mine.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(a, b), n
    ids = torch.randint(0, 256, (2, 48), generator=torch.Generator().manual_seed(5))
    out_a, out_b = mine(input_ids=ids, labels=ids), theirs(input_ids=ids, labels=ids)
    out_a.loss.backward()
    out_b.loss.backward()
    torch.testing.assert_close(out_a.loss, out_b.loss, rtol=1e-5, atol=1e-6)
    grads = dict(theirs.named_parameters())
    for n, p in mine.named_parameters():
        torch.testing.assert_close(p.grad, grads[n].grad, rtol=1e-4, atol=1e-6)


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}


@pytest.mark.parametrize("extra", [{"attention_bias": True}, {"rope_scaling": LLAMA3_ROPE}, {"hidden_act": "gelu"}],
                         ids=["bias", "rope", "act"])
def test_what_the_native_module_lacks_goes_to_transformers(tmp_path, extra):
    path = tmp_path / "llama.json"
    path.write_text(json.dumps({**LLAMA, **extra}))
    assert models.resolve(config_file=str(path), seq_len=64).impl == "transformers"


def test_a_mistral_longer_than_its_window_goes_to_transformers(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**LLAMA, "model_type": "mistral", "sliding_window": 32}))
    assert models.resolve(config_file=str(path), seq_len=32).impl == "fabricbench"
    assert models.resolve(config_file=str(path), seq_len=33).impl == "transformers"


def test_the_launcher_and_estimate_import_neither_torch_nor_transformers_for_a_config(tmp_path):
    """A fresh process, as the command's own: Ψ, the task and the numbers of a config file from its numbers."""
    path = tmp_path / "llama-1b.json"
    path.write_text(json.dumps({**LLAMA, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 16,
                                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}))
    code = ("import sys, json\nfrom fabricbench.training import models, estimate\n"
            f"r = models.resolve_shape(config_file={str(path)!r})\n"
            f"doc = estimate.for_model(model_config={str(path)!r}, num_gpus=2, batch_size=4)\n"
            "print(json.dumps([r.params, r.task, doc['params'], 'torch' in sys.modules, "
            "'transformers' in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    psi, task, est, torch_in, tf_in = json.loads(p.stdout.strip().splitlines()[-1])
    assert psi == est == sum(x.numel() for x in _built(json.loads(path.read_text())).parameters())
    assert (task, torch_in, tf_in) == ("causal-lm", False, False)


@pytest.mark.slow
def test_the_ranks_count_psi_of_a_family_with_no_formula(tmp_path):
    """GPT-Neo has no formula: the command reads the file with transformers, the ranks count Ψ on the model
    they build, and the record carries their count (the meta-device count) with the estimate made from it."""
    from fabricbench.results import ResultWriter
    from fabricbench.training import launch

    data = dict(model_type="gpt_neo", hidden_size=32, num_layers=2, num_heads=4, vocab_size=128,
                attention_types=[[["global", "local"], 1]], max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
    path = tmp_path / "neo.json"
    path.write_text(json.dumps(data))
    assert families.facts(data) is None
    with ResultWriter(tmp_path / "t.jsonl") as w:
        (rec,) = launch.run(launch.TrainConfig(strategies=["ddp"], model_config=str(path), device="cpu", nprocs=2,
                                               steps=4, warmup_steps=1, trace_steps=0, repeats=1, target_ci=None,
                                               seq_len=16, batch_size=2), w, quiet=True)
    assert rec["status"] == "ok", rec.get("message")
    assert rec["params"] == sum(p.numel() for p in _built(data).parameters())
    assert rec["estimate"]["params_bytes"] == 4 * rec["params"]  # fp32 on CPU
