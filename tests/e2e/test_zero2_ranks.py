"""ZeRO-2 on 3 gloo ranks passes its own strategy check.

DeepSpeed ZeRO-1/2 keep whole the gradient of every parameter that touches a rank's 1/n of the flat buffer
(verify.py's docstring); on lab-mistral at 3 ranks that is 0.350, 0.450 and 0.350 of Ψ, which the check
used to call "grads not sharded". The fast tests pin the arithmetic on the model's own tensor sizes; the
slow one runs DeepSpeed on 3 real ranks.
"""

import importlib.util

import pytest

from fabricbench.training import launch, models, verify
from fabricbench.training.strategies import STRATEGIES

# lab-mistral's trainable tensors in DeepSpeed's flat order (embeddings first and last), Ψ = 656,000
LAB_MISTRAL = [131072, 16384, 8192, 8192, 16384, 49152, 49152, 49152, 128, 128, 16384, 8192, 8192, 16384, 49152,
               49152, 49152, 128, 128, 128, 131072]
PSI = sum(LAB_MISTRAL)


def _held(grads: int, touched: int) -> verify.Holdings:
    return verify.Holdings(params_bytes=4 * PSI, grads_bytes=4 * grads, optimizer_bytes=8 * PSI // 3,
                           master_bytes=4 * PSI // 3, params_numel=PSI, grads_numel=grads,
                           optimizer_numel=2 * PSI // 3 + 1, grads_touched_numel=touched)


def test_touched_is_the_whole_tensors_each_third_meets():
    # what the failing H200 lab's ranks held (rank 2's 4 more: DeepSpeed's alignment padding)
    assert [verify.touched(LAB_MISTRAL, 3, r) for r in range(3)] == [229376, 295168, 229760]
    assert verify.touched(LAB_MISTRAL, 1, 0) == PSI
    assert verify.touched([10] * 6, 3, 1) == 20  # boundaries on tensor edges: exactly 1/n
    assert verify.touched([1, 100, 1], 2, 0) == 101  # a straddling tensor counts whole on both sides
    assert verify.touched([1, 100, 1], 2, 1) == 101


def test_check_accepts_deepspeeds_layout_and_still_catches_whole_gradients():
    z2 = STRATEGIES.get("zero2")
    held = [_held(229376, 229376), _held(295168, 295168), _held(229764, 229760)]
    assert verify.check(z2, engine=("deepspeed", 2), world_size=3, expected_world=3, psi=PSI, held=held) == []
    # a rank that kept every gradient is still caught, bound or not
    whole = [_held(PSI, 229376), _held(295168, 295168), _held(229764, 229760)]
    problems = verify.check(z2, engine=("deepspeed", 2), world_size=3, expected_world=3, psi=PSI, held=whole)
    assert len(problems) == 1 and problems[0].startswith("grads not sharded: rank 0 holds 656000")
    # a record from before the bound existed (0) is judged on 1.10/n as before
    old = [_held(295168, 0)] * 3
    assert len(verify.check(z2, engine=("deepspeed", 2), world_size=3, expected_world=3, psi=PSI, held=old)) == 3


def test_lab_mistral_order_is_the_models():
    m = models.build(models.resolve(name="lab-mistral"), meta=True)
    assert [p.numel() for p in m.parameters() if p.requires_grad] == LAB_MISTRAL


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed is not installed")
def test_zero2_on_three_gloo_ranks_passes_its_check(tmp_path):
    """~60-90 s on 2 cores: DeepSpeed's start-up on 3 ranks, 3 tiny steps, no trace."""
    cfg = launch.TrainConfig(strategies=["zero2"], model="lab-mistral", device="cpu", nprocs=3, steps=3,
                             warmup_steps=1, batch_size=1, seq_len=16, lr=1e-3, timeout_s=600, repeats=1,
                             target_ci=None, trace_steps=0)
    resolved = models.resolve(name="lab-mistral")
    body = launch.run_strategy(cfg, "zero2", resolved, models.count_params(resolved))
    assert body["status"] == "ok", body.get("message")
    touched = [h["grads_touched_numel"] for h in body["holdings"]]
    assert touched == [verify.touched(LAB_MISTRAL, 3, r) for r in range(3)]
    fractions = body["held_fraction"]["grads"]
    assert max(fractions) > 1.10 / 3  # the layout that used to fail, now explained by the bound
