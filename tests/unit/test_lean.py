"""A rank hides what transformers and Accelerate would import for work no training step does (lean.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("transformers")

PROBE = """
import json, sys, tempfile
from fabricbench.training import lean
hidden = lean.hide_unused({engine!r})
import torch
from accelerate import Accelerator
from fabricbench.training import models
# a --model-config is read with transformers before the model's class is imported (the case that failed)
cfg = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
# (Qwen2: transformers builds it; a Mistral or Llama file is built by the native module, without transformers)
json.dump(dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100), cfg)
cfg.close()
r = models.resolve(config_file=cfg.name)
m = models.build(r)
ids = torch.randint(0, 100, (2, 16))
m(input_ids=ids, labels=ids).loss.backward()  # a training step's work, with the packages hidden
from transformers.utils import is_scipy_available, is_sklearn_available
from accelerate.utils import is_boto3_available
print(hidden, sys.modules.get("scipy", "absent"), is_scipy_available(), is_sklearn_available(),
      bool(is_boto3_available()))
"""


def _probe(engine: str) -> str:
    r = subprocess.run([sys.executable, "-c", PROBE.format(engine=engine)], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # real processes for more than ~3 s (docs/testing.md)
def test_a_ddp_rank_trains_with_scipy_and_sklearn_hidden_from_transformers():
    assert _probe("ddp") == "['sklearn', 'scipy', 'boto3'] None False False False"


def test_nothing_is_hidden_once_transformers_is_imported(monkeypatch):
    """transformers decides once whether scipy is installed: hidden after, its loss table would still import
    scipy.optimize and fail (a --model-config rank did so when the hiding came after reading the config)."""
    from fabricbench.training import lean

    monkeypatch.setitem(sys.modules, "transformers", sys.modules.get("transformers") or object())
    for name in lean.UNUSED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert lean.hide_unused("ddp") == []


def test_a_deepspeed_rank_hides_nothing(monkeypatch):
    from fabricbench.training import lean

    for name in (*lean.UNUSED, "transformers"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert lean.hide_unused("deepspeed") == []
    assert all(name not in sys.modules for name in lean.UNUSED)
