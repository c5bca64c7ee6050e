"""A user's measurement script: one collective, a sweep, its table and a saved file read back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fabricbench


def one() -> float | None:
    r: fabricbench.CollectiveResult = fabricbench.measure(
        "all_reduce", "1G", fabricbench.SweepConfig(gpus=(0, 1), dtype="bfloat16"))
    print(r.op, r.bytes, r.nranks, r.algbw_gbps, r.status)
    return r.busbw_gbps


def sweep_on_cpu() -> fabricbench.SweepResult:
    cfg = fabricbench.SweepConfig(engine="torch", backend="gloo", nprocs=2, sizes=fabricbench.SizeSweep.parse("1K-1M"),
                                  ops=("all_reduce",))
    rows: fabricbench.SweepResult = fabricbench.sweep(cfg, out="cpu.jsonl")
    wrong: list[fabricbench.CollectiveResult] = rows.wrong
    slowest = max((r.time_us or 0.0 for r in rows.records), default=0.0)
    print(f"{len(rows.records)} sizes, slowest {slowest:.1f} us, {len(wrong)} wrong")
    return rows


def saved(path: str) -> list[dict[str, Any]]:
    records: Iterator[dict[str, Any]] = fabricbench.read_results(path, kind="collective")
    return [rec for rec in records if rec.get("op") == "all_reduce"]


def table(rows: fabricbench.SweepResult) -> int:
    df = fabricbench.to_dataframe(rows)
    return len(df)


def sizes() -> list[int]:
    sweep: fabricbench.SizeSweep = fabricbench.SizeSweep.parse("1M-1G:x4")
    return sweep.expand()


if __name__ == "__main__":
    print(one(), table(sweep_on_cpu()), saved("cpu.jsonl")[:1], sizes()[:3])
