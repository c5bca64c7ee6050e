"""One GPU: the strategies on a tiny model at world size 1, with peak memory measured.

    pytest tests/gpu/test_train_gpu.py      (skipped, with the detected count, without a GPU)
"""

import importlib.util

import pytest

from fabricbench.results import ResultWriter
from fabricbench.training import launch

STRATEGIES = ["ddp", "fsdp"] + (["zero1", "zero2", "zero3"] if importlib.util.find_spec("deepspeed") else [])


@pytest.mark.gpu(1)
def test_strategies_on_one_gpu(tmp_path):
    cfg = launch.TrainConfig(strategies=STRATEGIES, model="tiny-mistral", device="cuda", gpus=(0,), steps=6,
                             warmup_steps=2, batch_size=4, seq_len=64, lr=1e-3, timeout_s=600)
    with ResultWriter(tmp_path / "t.jsonl") as w:
        recs = launch.run(cfg, w)
    for r in recs:
        assert r["status"] == "ok", (r["strategy"], r["message"])
        assert r["world_size"] == 1 and r["last_loss"] < r["first_loss"]
        psi = r["params"]
        # at least the model states the framework keeps (the estimate), from the allocator's own count
        assert r["memory"]["max_allocated_bytes"] >= r["estimate"]["total_bytes"]
        assert r["memory"]["max_reserved_bytes"] >= r["memory"]["max_allocated_bytes"]
        assert r["holdings"][0]["params_numel"] >= psi
