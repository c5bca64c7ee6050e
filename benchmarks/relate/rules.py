"""relate's hidden-communication rules side by side on the committed labs' records: the reference rule
(a slower fabric hides no more than the reference hid: relate(overlap_window=False)) against the default
(where communication has resources of its own, up to the reference's overlap window: relating/window.py).
Prints, per lab, the held-out points' median and largest |error| and coverage under each rule, and each
point of a strategy the window moved.

    python3 benchmarks/relate/rules.py > benchmarks/relate/results/h100-2026-12-06/window-rule.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import fabricbench
from fabricbench.relating.api import OVERLAP_WINDOW

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "relate" / "results"
LABS = [  # (name, records); the one-GPU lab's runs, then the CPU labs whose records have calls' rows
    *((f"h100-2026-12-06/{d}", sorted((RESULTS / "h100-2026-12-06" / d / "lab").glob("*.jsonl")))
      for d in ("three-strategies-a", "three-strategies-b", "options-tiny-mistral")),
    *((f"cpu-lab/{d}", [RESULTS / "cpu-lab" / d / "records.jsonl"])
      for d in ("relate-lab", "relate-lab-rerun", "relate-lab-strong", "relate-credit-gap")),
]


def _points(res):
    return [r for r in res.rows if r.fabric != r.reference and r.observed_step_s]


def main() -> int:
    for name, paths in LABS:
        if not paths or not all(p.exists() for p in paths):
            print(f"{name}: no records here")
            continue
        bare = fabricbench.relate(fabricbench.RelateConfig(inputs=[str(p) for p in paths], overlap_window=False))
        now = fabricbench.relate(fabricbench.RelateConfig(inputs=[str(p) for p in paths]))
        print(f"{name}\n  reference rule: {bare.coverage.summary()}\n  default:        {now.coverage.summary()}")
        before = {(r.strategy, r.nranks, r.fabric): r for r in _points(bare)}
        for r in _points(now):
            if OVERLAP_WINDOW in r.flags and (b := before.get((r.strategy, r.nranks, r.fabric))):
                print(f"    {r.strategy} {r.nranks} {r.fabric}: observed {r.observed_step_s * 1e3:.1f} ms, "
                      f"{b.residual:+.1%} -> {r.residual:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
