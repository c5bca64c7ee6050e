"""Do identical studies give the same answer? One row per study: each strategy's figure with its interval,
the paired ratio with its interval, the verdict, rounds, the batch and its margin, wall time.

    python3 benchmarks/repeatability/verdicts_check.py OUT/differ/study-*.json      (verdicts_gpu.sh runs it)

Each argument is a study's `fabricbench report DIR --json` (DIR beside it, same name without .json, for
the wall time in DIR.wall). The last line says AGREE or CONTRADICT: whether any two studies contradict on
a comparison (measuring/comparison.contradicts: "a faster" against "b faster", or "faster" against
"equivalent"; "undecided" contradicts nothing), then the verdicts counted.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from fabricbench.training.repeats import contradictions


def _ci(ci) -> str:
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "[-]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summaries", nargs="+", help="report --json outputs, one per study")
    a = ap.parse_args()
    sums: dict[str, dict] = {}
    for p in a.summaries:
        try:
            sums[p] = json.loads(Path(p).read_text())
        except (OSError, ValueError) as e:
            print(f"{p}: unreadable ({e}); left out")
    rows = []
    for p, s in sums.items():
        wall = Path(p[:-5] + ".wall") if p.endswith(".json") else None
        wall_s = wall.read_text().strip() if wall and wall.exists() else "?"
        b = s.get("batch") or {}
        margin = b.get("clearance", b.get("margin"))  # the batch unit's distance from --gain
        batch = f"{b.get('chosen')} ({'fixed' if b.get('why') == '--batch-size' else 'picked'}" + \
            (f", margin {margin:+.1%})" if isinstance(margin, (int, float)) else ")")
        figs = "; ".join(f"{f['strategy']} {f['samples_per_s']:.1f} {_ci(f.get('ci95'))}"
                         for f in s.get("figures", []) if f.get("samples_per_s"))
        for c in s.get("comparisons", []) or [{}]:
            ratio = f"{c['a']}/{c['b']} {c['ratio']:.4f} " + (f"[{c['ci95'][0]:.4f}, {c['ci95'][1]:.4f}]"
                                                          if c.get("ci95") else "[-]") if c.get("ratio") else "-"
            rows.append([Path(p).stem, figs, ratio, c.get("verdict", "-"), str(c.get("rounds", "-")),
                         "paired" if c.get("paired") else "unpaired", batch, wall_s])
    head = ["study", "samples/s [95% CI]", "ratio [95% CI]", "verdict", "rounds", "pairing", "batch", "wall s"]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    for p, s in sums.items():
        for c in s.get("comparisons", []):
            print(f"{Path(p).stem}: {c.get('text')}")
    bad = [f"{Path(px).stem} against {Path(py).stem}: {line}"
           for (px, x), (py, y) in itertools.combinations(sums.items(), 2) for line in contradictions(x, y)]
    for line in bad:
        print("contradiction:", line)
    verdicts = [f"{c['verdict']}" + (f" ({c['a']})" if c["verdict"] == "faster" else "")
                for s in sums.values() for c in s.get("comparisons", [])]
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    same = len(set(verdicts)) == 1 and len(verdicts) == len(sums)
    print(("AGREE" if not bad else "CONTRADICT") + f": {len(sums)} studies, {len(bad)} contradiction(s); "
          f"verdicts {counts}; " + ("all the same" if same else "not all the same"))


if __name__ == "__main__":
    main()
