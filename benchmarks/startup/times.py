"""How long a user waits for the commands that must answer at once: `fabricbench --help` (target 0.5 s)
and `fabricbench estimate --model mistral-7b --gpus 4` (target 2 s), each in a fresh process.

    python3 benchmarks/startup/times.py [--runs 5] [--out benchmarks/startup/results/<machine>/times.txt]

Wall-clock limits live here, not in the unit tests: on a loaded machine a unit test's timing flakes, while
here the median of --runs fresh processes on a quiet one is the figure (each run also checks that neither
command imported torch or transformers, as the unit tests do). Topology analysis at scale has its own
benchmark: benchmarks/topology/scaling.py. Exit status 1 when a median is over its target.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

CASES = {  # name -> (argv of `fabricbench`, target seconds, modules that must stay unimported)
    "--help": (["--help"], 0.5, ("torch", "fabricbench.cli.sweep")),
    "estimate": (["estimate", "--model", "mistral-7b", "--gpus", "4"], 2.0, ("torch", "transformers")),
}


def once(argv: list[str], unimported: tuple[str, ...]) -> float:
    code = ("import sys; from fabricbench.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"assert not [m for m in {unimported!r} if m in sys.modules], 'imported: ' + repr(sorted(sys.modules))\n")
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"fabricbench {' '.join(argv)}: {out.stderr.strip().splitlines()[-1]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = [f"# {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, python {platform.python_version()}",
             f"{'command':<10} {'median_s':>9} {'max_s':>7} {'target_s':>9}  verdict"]
    worst = 0
    for name, (argv, target, unimported) in CASES.items():
        times = [once(argv, unimported) for _ in range(a.runs)]
        med = statistics.median(times)
        ok = med <= target
        worst |= not ok
        lines.append(f"{name:<10} {med:>9.3f} {max(times):>7.3f} {target:>9.1f}  {'within' if ok else 'OVER'}")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
