"""A rank's imports with and without training/lean.py's hiding (scikit-learn, scipy, boto3), alternated in
fresh processes (imports are most of a run's start-up).

    python3 benchmarks/startup/lean_imports.py [--pairs 4] [--model mistral-1b]

Each probe is what a rank imports before its init (training/worker.py's _imports itself: torch,
torch.distributed, Accelerate, the model's class), timed from the interpreter's start to the end of those
imports; printed: median [min, max] wall per arm, the difference, and which of the packages each arm
loaded. A built-in Mistral row imports no transformers (training/native.py), so there only boto3's share
shows; a DINOv2 row still goes through transformers, and scikit-learn's and scipy's shares show there.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

# the worker's own import step, so that the probe follows it; the hiding first, as the worker's main does
PROBE = """
import sys
from fabricbench.training import lean
if {lean}:
    lean.hide_unused("accelerate")
from fabricbench.training import models, worker
worker._imports("accelerate", models.resolve(name={model!r}))
print(" ".join(n for n in ("sklearn", "scipy", "boto3", "sympy") if sys.modules.get(n) is not None) or "-")
"""


def once(lean: bool, model: str) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", PROBE.format(lean=lean, model=model)], capture_output=True,
                       text=True, timeout=300)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"probe failed: {r.stderr.strip()[-800:]}")
    return wall, r.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--model", default="mistral-1b")
    args = ap.parse_args()
    walls: dict[bool, list[float]] = {False: [], True: []}
    loaded: dict[bool, str] = {}
    once(False, args.model)  # the page cache warmed for both arms alike
    for _ in range(args.pairs):
        for arm in (False, True):
            w, what = once(arm, args.model)
            walls[arm].append(w)
            loaded[arm] = what
    for arm in (False, True):
        v = walls[arm]
        print(f"{'lean' if arm else 'as before':<10} {statistics.median(v):6.2f} s [{min(v):.2f}, {max(v):.2f}]"
              f"  loaded: {loaded[arm]}")
    d = statistics.median(walls[False]) - statistics.median(walls[True])
    print(f"lean saves {d:.2f} s of a rank's imports (median of {args.pairs} alternated pairs, {args.model})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
