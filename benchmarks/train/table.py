"""Markdown table of kind "train" records: throughput, peak memory and the estimate side by side.

    python benchmarks/train/table.py benchmarks/train/results/h200-1gpu/train.jsonl
GB are decimal (1e9 bytes); "estimate" is the framework recipe's model states + the activation estimate.
"""

import sys

from fabricbench.results import read_results


def gb(v):
    return f"{v / 1e9:.2f}" if isinstance(v, (int, float)) else "-"


def main(path: str) -> None:
    print("| model | strategy | status | engine (stage) | samples/s | tokens/s | MFU | median step s | cv "
          "| peak alloc GB | peak reserved GB | estimate states GB | estimate +act GB | loss first→last |")
    print("|" + "---|" * 14)
    for r in read_results(path, kind="train"):
        t = r.get("throughput") or {}
        m = r.get("memory") or {}
        st = r.get("step_time") or {}
        eng = f"{r.get('engine')}" + (f" ({r['zero_stage']})" if r.get("zero_stage") is not None else "")
        loss = f"{r['first_loss']:.3f}→{r['last_loss']:.3f}" if r.get("first_loss") is not None else "-"
        f = lambda v, p: f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"  # noqa: E731
        print(f"| {r['model']} | {r['strategy']} | {r['status']} | {eng} | {f(t.get('samples_per_s'), 1)} "
              f"| {f(t.get('tokens_per_s'), 0)} | {f(t.get('mfu'), 3)} | {f(st.get('median_s'), 4)} "
              f"| {f(st.get('cv'), 3)} | {gb(m.get('max_allocated_bytes'))} | {gb(m.get('max_reserved_bytes'))} "
              f"| {gb(r['estimate']['total_bytes'])} | {gb(r['estimate']['with_activations_bytes'])} | {loss} |")


if __name__ == "__main__":
    main(sys.argv[1])
