"""A user's training comparison: the strategies trained on the CPU, and what they would hold on 8 GPUs."""

from __future__ import annotations

import dataclasses

import fabricbench


def train_on_cpu() -> list[tuple[str, float | None]]:
    cfg = fabricbench.TrainConfig(strategies="ddp,fsdp", model="tiny-mistral", device="cpu", nprocs=2, steps=6,
                                  repeats=1, target_ci=None)
    longer: fabricbench.TrainConfig = dataclasses.replace(cfg, steps=12)
    t: fabricbench.TrainRunResult = fabricbench.train(longer, out="t.jsonl")
    runs: tuple[fabricbench.TrainResult, ...] = t.records
    if t.failed:
        print("failed:", [r.strategy for r in t.failed])
    return [(r.strategy, r.samples_per_s) for r in runs]


def memory() -> int:
    e: fabricbench.EstimateResult = fabricbench.estimate(
        fabricbench.EstimateConfig(model="mistral-7b", gpus=8, strategies=("zero3", "fsdp")))
    return e.strategies["fsdp"]["total_bytes"] + e.params


if __name__ == "__main__":
    print(train_on_cpu(), memory())
