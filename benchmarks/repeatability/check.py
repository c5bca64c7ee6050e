"""Do identical studies agree? Their summaries compared pairwise (fabricbench.training.repeats), the
spread of their headline throughputs, and each one's host-bound notes and picked batch.

    python3 benchmarks/repeatability/check.py OUT/study-1 OUT/study-2 OUT/study-3

The last line says PASS or FAIL: no contradiction between any two (comparison verdicts: "a faster" against
"b faster" or "equivalent"; every figure's intervals overlap) and a headline spread of at most --spread
(2%: max / min - 1 of the fastest strategy's samples/s on the first fabric).
"""

from __future__ import annotations

import argparse
import itertools

from fabricbench.studying.report import summary
from fabricbench.training.repeats import contradictions, disjoint_figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("studies", nargs="+")
    ap.add_argument("--spread", type=float, default=0.02)
    a = ap.parse_args()
    sums = {d: summary(d) for d in a.studies}
    heads = []
    for d, s in sums.items():
        fab = next(iter(s["rankings"]), None)
        best = s["rankings"][fab][0][0] if fab and s["rankings"][fab] else None
        fig = next((f for f in s["figures"] if f["strategy"] == best and f["fabric"] == fab), None)
        if fig:
            heads.append(fig["samples_per_s"])
        print(f"{d}: batch {s['batch'].get('chosen')} ({s['batch'].get('why')}); " + "; ".join(s["headline"]))
        for f in s["figures"]:
            print(f"  {f['strategy']} @ {f['fabric']}: {f['samples_per_s']:.1f} samples/s, 95% CI {f['ci95']}, "
                  f"{f['runs']} runs {[round(x, 1) for x in f['run_samples_per_s']]}, GPU busy "
                  f"{f['gpu_busy_fraction']}" + (f" ({f['host_bound']})" if f["host_bound"] else ""))
    bad = [f"{x} vs {y}: {c}" for x, y in itertools.combinations(sums, 2)
           for c in contradictions(sums[x], sums[y]) + disjoint_figures(sums[x], sums[y])]
    for b in bad:
        print("contradiction:", b)
    spread = max(heads) / min(heads) - 1 if len(heads) == len(sums) and heads else None
    print(f"headline samples/s: {[round(h, 1) for h in heads]}, spread "
          + (f"{spread:.2%}" if spread is not None else "n/a (a study has no figure)"))
    ok = not bad and spread is not None and spread <= a.spread
    print(("PASS" if ok else "FAIL") + f": {len(bad)} contradiction(s), spread "
          + (f"{spread:.2%}" if spread is not None else "n/a") + f" (limit {a.spread:.0%})")


if __name__ == "__main__":
    main()
