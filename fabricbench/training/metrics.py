"""Throughput, step-time statistics and MFU of a training run.

    fabricbench train --strategy ddp --model mistral-1b --gpus 0 --steps 8 --warmup-steps 3

Steps after the warm-up are timed; each step's time is the slowest rank's (ranks wait for each other in
the collectives anyway). samples/s = global batch / median step time (one slow step among many moves a
mean, not the median; such steps are listed as outliers); tokens/s = samples/s × tokens per sample.
MFU = model FLOPs per step / median step time / (peak bf16 FLOP/s × ranks), with model FLOPs
= 6·Ψ·tokens (forward 2, backward 4 per parameter per token; Kaplan et al. 2020). For a causal LM that is
the usual estimate without attention's s² term; for a ViT it is approximate (the classifier head sees one
token, not all). Peaks are dense bf16 tensor-core figures from the vendors' data sheets, by GPU name.
"""

from __future__ import annotations

from typing import Any

from fabricbench.statistics.figures import outliers, summarize

# dense bf16 peak FLOP/s (no sparsity); matched by substring of torch.cuda.get_device_name, first wins
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989e12),
    ("H100", 989e12),
    ("GH200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
)


def peak_flops(gpu_name: str | None) -> float | None:
    if not gpu_name:
        return None
    for key, value in PEAK_BF16_FLOPS:
        if key in gpu_name:
            return value
    return None


def step_stats(times_s: list[float], *, first_index: int = 0) -> dict[str, Any]:
    """median, mean, p95, cv, the median's 95% CI (relative half-width; None under 6 steps) and the outlier
    steps of step times in seconds, by the one statistics module every record uses
    (fabricbench/statistics/figures.py: p95 by linear interpolation, cv = population stdev / mean).
    Outliers are [step index, seconds], the index counting from the run's first step (first_index is the
    index of times_s[0])."""
    if not times_s:
        return {"median_s": None, "mean_s": None, "p95_s": None, "cv": None, "ci95_rel": None, "outliers": []}
    st = summarize(times_s)
    return {"median_s": st.median, "mean_s": st.mean, "p95_s": st.p95, "cv": st.cv if st.n > 1 else None,
            "ci95_rel": st.ci95_rel, "outliers": [[first_index + i, times_s[i]] for i in outliers(times_s)]}


def throughput(*, times_s: list[float], global_batch: int, tokens_per_sample: int, psi: int, nranks: int,
               gpu_name: str | None) -> dict[str, Any]:
    median = summarize(times_s).median if times_s else 0.0
    if median <= 0:
        return {"samples_per_s": None, "tokens_per_s": None, "mfu": None, "model_flops_per_step": None,
                "peak_flops_per_gpu": peak_flops(gpu_name)}
    samples_per_s = global_batch / median
    flops_step = 6 * psi * global_batch * tokens_per_sample
    peak = peak_flops(gpu_name)
    mfu = flops_step / median / (peak * nranks) if peak else None
    return {"samples_per_s": samples_per_s, "tokens_per_s": samples_per_s * tokens_per_sample, "mfu": mfu,
            "model_flops_per_step": flops_step, "peak_flops_per_gpu": peak, "from": "median step time"}
