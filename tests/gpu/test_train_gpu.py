"""One GPU: the strategies on a tiny model at world size 1, with peak memory measured.

    pytest tests/gpu/test_train_gpu.py      (skipped, with the detected count, without a GPU)
"""

import importlib.util

import pytest

from fabricbench.errors import UsageError
from fabricbench.results import ResultWriter
from fabricbench.training import launch
from clirun import run_cli_subprocess

STRATEGIES = ["ddp", "fsdp"] + (["zero1", "zero2", "zero3"] if importlib.util.find_spec("deepspeed") else [])


@pytest.mark.gpu(1)
def test_strategies_on_one_gpu(tmp_path):
    cfg = launch.TrainConfig(strategies=STRATEGIES, model="tiny-mistral", device="cuda", gpus=(0,), steps=6,
                             warmup_steps=2, batch_size=4, seq_len=64, lr=1e-3, timeout_s=600, repeats=1,
                             target_ci=None)
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


# --- the one-GPU lab: several gloo ranks sharing GPU 0 (NCCL refuses two ranks on one GPU) -----------------
def _netns_capable() -> bool:
    import os
    import shutil

    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None


@pytest.mark.gpu(1)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_gloo_ranks_on_one_gpu(tmp_path, strategy):
    cfg = launch.TrainConfig(strategies=[strategy], model="tiny-mistral", device="cuda", gpus=(0,), nprocs=2,
                             backend="gloo", steps=5, warmup_steps=2, batch_size=4, seq_len=64, lr=1e-3,
                             repeats=1, target_ci=None, trace_steps=1, timeout_s=300)
    with ResultWriter(tmp_path / "t.jsonl") as w:
        (r,) = launch.run(cfg, w)
    assert r["status"] == "ok", r["message"]
    assert r["world_size"] == 2 and r["rank_gpus"] == [0, 0] and r["backend"] == "gloo"
    assert r["last_loss"] < r["first_loss"]
    assert r["step_time"]["median_s"] > 0 and r["comm"]["world_size"] == 2
    assert r["comm"]["total_bytes_per_step"] > 0  # the ranks really exchanged gradients through gloo
    assert 0 < r["gpu_busy_fraction"] <= 1


@pytest.mark.gpu(1)
def test_nccl_refuses_two_ranks_on_one_gpu():
    with pytest.raises(UsageError, match="Duplicate GPU detected"):  # checked when the config is built
        launch.TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cuda", gpus=(0,), nprocs=2)


@pytest.mark.gpu(1)
def test_records_name_the_nccl_loaded(tmp_path):
    cfg = launch.TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cuda", gpus=(0,), steps=4,
                             warmup_steps=2, batch_size=2, seq_len=32, repeats=1, target_ci=None, trace_steps=1)
    with ResultWriter(tmp_path / "t.jsonl") as w:
        (r,) = launch.run(cfg, w)
    import torch

    assert r["nccl"]["version"] == ".".join(map(str, torch.cuda.nccl.version()))
    assert r["nccl"]["library"] is None or "libnccl" in r["nccl"]["library"]
    assert "NCCL_VERSION" not in r.get("env", {})


@pytest.mark.gpu(1)
@pytest.mark.skipif(not _netns_capable(), reason="shaped fabrics need root, ip and tc (iproute2)")
def test_relate_default_against_shaped_on_one_gpu(tmp_path):
    """2 gloo ranks on GPU 0: DDP at default and under shaped:1gbit, a gloo sweep at each, relate."""
    import fabricbench

    files = []
    for fab in ("default", "shaped:1gbit"):
        t = tmp_path / f"train-{fab.replace(':', '_')}.jsonl"
        cfg = launch.TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cuda", gpus=(0,), nprocs=2,
                                 backend="gloo", steps=6, warmup_steps=2, batch_size=4, seq_len=64, repeats=1,
                                 target_ci=None, trace_steps=1, fabric=fab, timeout_s=300)
        with ResultWriter(t) as w:
            launch.run(cfg, w)
        s = tmp_path / f"sweep-{fab.replace(':', '_')}.jsonl"
        code, _, err = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--gpus",
                                           "0", "--ops", "all_reduce", "--sizes", "64K-64M:x4", "--iters", "4",
                                           "--warmup", "1", "--fabric", fab, "--out", s, "--quiet"], timeout=300)
        assert code == 0, err
        files += [t, s]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=[str(f) for f in files], reference="default"))
    row = next(r for r in res.rows if r.fabric == "shaped:1gbit")
    assert row.observed_slowdown > 1.0 and row.busbw_ratio < 1.0
    lo, hi = row.predicted_slowdown_ci95
    assert lo <= row.predicted_slowdown <= hi
