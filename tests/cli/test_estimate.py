"""The estimator's arithmetic against docs/domain.md's formulas, the parameter count, and its CLI."""

import json

import pytest

from fabricbench.training import estimate as est
from fabricbench.training import models
from clirun import refused, run_cli

PSI, N = 10**9, 4


def test_zero_paper_matches_domain_formulas():
    s = est.model_states(psi=PSI, num_gpus=N, recipe="zero-paper")
    k = 12  # master + m + v
    assert s["ddp"]["total_bytes"] == (2 + 2 + k) * PSI == 16 * 10**9
    assert s["zero1"]["total_bytes"] == 4 * PSI + k * PSI // N == 7 * 10**9
    assert s["zero2"]["total_bytes"] == 2 * PSI + (2 + k) * PSI // N == 5_500_000_000
    assert s["zero3"]["total_bytes"] == (2 + 2 + k) * PSI // N == 4 * 10**9
    assert s["fsdp"] == s["zero3"]
    assert s["zero2"] == {"params_bytes": 2 * 10**9, "grads_bytes": 500_000_000, "optimizer_bytes": 2 * 10**9,
                          "master_bytes": 10**9, "total_bytes": 5_500_000_000}


def test_framework_recipe_per_framework():
    s = est.model_states(psi=PSI, num_gpus=N)  # the default recipe
    # Accelerate autocast DDP: fp32 params and grads, fp32 m and v, no separate master
    assert s["ddp"] == {"params_bytes": 4 * PSI, "grads_bytes": 4 * PSI, "optimizer_bytes": 8 * PSI,
                        "master_bytes": 0, "total_bytes": 16 * PSI}
    # DeepSpeed: bf16 params and grads, fp32 master and m, v partitioned
    assert s["zero1"] == {"params_bytes": 2 * PSI, "grads_bytes": 2 * PSI, "optimizer_bytes": 2 * PSI,
                          "master_bytes": PSI, "total_bytes": 7 * PSI}
    assert s["zero3"]["total_bytes"] == 4 * PSI
    # FSDP2: fp32 sharded params (the master), grads, m and v
    assert s["fsdp"] == {"params_bytes": PSI, "grads_bytes": PSI, "optimizer_bytes": 2 * PSI,
                         "master_bytes": 0, "total_bytes": 4 * PSI}


def test_fp32_recipe_and_rounding_up():
    s = est.model_states(psi=10, num_gpus=3, recipe="fp32")
    assert s["ddp"]["total_bytes"] == 160
    assert s["zero1"]["optimizer_bytes"] == 27  # ceil(80 / 3): partitions are padded to whole shares
    assert s["zero3"]["params_bytes"] == 14  # ceil(40 / 3)


def test_unknown_recipe_and_bad_gpu_count():
    with pytest.raises(ValueError, match="unknown recipe 'fp8'; choose from framework"):
        est.model_states(psi=1, num_gpus=1, recipe="fp8")
    with pytest.raises(ValueError, match="--gpus 0"):
        est.model_states(psi=1, num_gpus=0)


# Ψ of each built-in model as counted on the meta device before the formulas existed: they must not move.
PARAMS = {"mistral-7b": 7_241_732_096, "mistral-1b": 1_032_931_328, "tiny-mistral": 106_816,
          "dinov2-base": 85_880_933, "dinov2-large": 303_435_877, "tiny-dinov2": 126_949}


@pytest.mark.parametrize("name", [m.name for m in models.MODELS])
def test_formula_equals_the_model_built_on_meta(name):
    """The formula (no transformers) against transformers' own model, and the known counts."""
    r = models.resolve(name=name)
    built = sum(p.numel() for p in models.build(r, meta=True).parameters())
    assert models.MODELS.get(name).params() == models.count_params(r) == built
    if name in PARAMS:
        assert built == PARAMS[name]
    # the numbers estimate reads without transformers are the config's own
    shape, cfg = models.MODELS.get(name).shape(), r.config
    for key in ("hidden_size", "num_hidden_layers", "patch_size", "image_size", "num_labels", "vocab_size"):
        if hasattr(shape, key):
            assert getattr(shape, key) == getattr(cfg, key), key


# the families' defaults against transformers' config classes: tests/unit/test_families.py


def test_estimate_needs_no_transformers_for_builtin_models(monkeypatch, capsys, tmp_path):
    """A plain install: transformers is absent. Built-in models and configs of a family with a formula
    answer; a config of another family names the extra."""
    import sys

    for mod in [m for m in sys.modules if m == "transformers" or m.startswith("transformers.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    code, out, err = run_cli(["estimate", "--model", "mistral-7b", "--gpus", "4", "--batch-size", "2", "--json"],
                             capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["params"] == PARAMS["mistral-7b"] and doc["activation_bytes"] == 34 * 512 * 2 * 4096 * 32
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"model_type": "gptj"}')
    code, _, err = run_cli(["estimate", "--model-config", cfg, "--gpus", "4"], capsys)
    assert code == 2
    assert err.strip().endswith('pip install "fabricbench[train]"')


def test_estimate_imports_neither_transformers_nor_torch():
    """A fresh process, as a user types it: what keeps it fast (how fast, within the 2 s the issue allows, is
    measured by benchmarks/startup/times.py: a wall-clock limit flakes in a unit test on a loaded machine)."""
    import subprocess
    import sys

    code = ("import sys; from fabricbench.cli import main\n"
            "try:\n    main(['estimate', '--model', 'mistral-7b', '--gpus', '4'])\nexcept SystemExit:\n    pass\n"
            "assert 'transformers' not in sys.modules and 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_activation_formula():
    cfg = models.resolve(name="dinov2-base").config
    # 34 * s * b * h * L with s = (224 / 14)^2 + 1 = 257 tokens
    assert est.activation_bytes(cfg, task=models.IMAGE_CLS, batch_size=32, seq_len=0, image_size=224) == \
        34 * 257 * 32 * 768 * 12


def test_cli_json_exact_shape(tmp_path, capsys):
    code, out, err = run_cli(["estimate", "--model", "mistral-7b", "--gpus", "4", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"model", "params", "num_gpus", "recipe", "strategies"}
    assert (doc["model"], doc["params"], doc["num_gpus"], doc["recipe"]) == ("mistral-7b", 7_241_732_096, 4,
                                                                          "framework")
    assert list(doc["strategies"]) == ["ddp", "zero1", "zero2", "zero3", "fsdp"]
    for row in doc["strategies"].values():
        assert set(row) == {"params_bytes", "grads_bytes", "optimizer_bytes", "master_bytes", "total_bytes"}
    assert doc["strategies"]["ddp"]["total_bytes"] == 16 * 7_241_732_096  # > 80 GB: no 80 GB GPU holds it
    assert doc["strategies"]["fsdp"]["total_bytes"] == 4 * 7_241_732_096  # < 80 GB over 4

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                               "vocab_size": 256}))
    code, out, err = run_cli(["estimate", "--model-config", cfg, "--gpus", "2", "--json", "--recipe", "zero-paper",
                              "--batch-size", "2", "--seq-len", "32"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["params"] == models.count_params(models.resolve(name="tiny-mistral")) == 106_816
    assert doc["activation_bytes"] == 34 * 32 * 2 * 64 * 2


@pytest.mark.parametrize("args, msg", [
    (["--model", "gpt-9", "--gpus", "2"], "Error: unknown model 'gpt-9'; choose from mistral-7b"),
    (["--model", "mistral-7b", "--gpus", "2", "--recipe", "fp8"], "Error: unknown recipe 'fp8'"),
    (["--gpus", "2"], "Error: name exactly one of --model NAME"),
])
def test_cli_errors_are_one_line_exit_2(args, msg, capsys):
    assert refused(["estimate", *args], capsys).startswith(msg)


def test_estimate_surface_is_frozen():
    from fabricbench.cli.estimate import estimate

    names = {opt for p in estimate.params for opt in p.opts}
    assert names == {"--model", "--model-config", "--gpus", "--num-gpus", "--strategies", "--strategy", "--recipe",
                     "--batch-size", "--seq-len", "--image-size", "--json"}, "options changed: update this list on purpose"
