"""A user's question of their own sweeps and training runs: predicted against observed slowdowns, a profiler
trace priced by the same model, and how a job's collectives compare with the sweep."""

from __future__ import annotations

import fabricbench


def slowdowns() -> list[tuple[str, str, float | None, float]]:
    rel: fabricbench.RelateResult = fabricbench.relate(
        fabricbench.RelateConfig(inputs=("sweeps.jsonl", "train.jsonl"), reference="default"))
    if rel.problems:
        print("\n".join(rel.problems))
    return [(row.strategy, row.fabric, row.observed_slowdown, row.predicted_slowdown) for row in rel.rows]


def my_loop() -> str:
    traced: fabricbench.RelateResult = fabricbench.relate(fabricbench.RelateConfig(traces=("prof/",),
                                                                                   inputs=("sweeps.jsonl",)))
    return traced.formula


def my_job() -> list[tuple[str, int, float | None]]:
    j: fabricbench.JobfitResult = fabricbench.jobfit(fabricbench.JobfitConfig(job=("nccl-inspector/",),
                                                                              sweep="ag.jsonl"))
    print(j.findings, j.warnings)
    return [(row.op, row.size_bytes, row.sweep_busbw) for row in j.rows]


if __name__ == "__main__":
    print(slowdowns(), my_loop(), my_job())
