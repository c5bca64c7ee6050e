"""Do faster runs give the same answer? Run-to-run spread of samples/s, the code before issue 38's start-up
work against this tree, on the same machine at the same time (issue 38, "keep the statistics honest").

    python3 benchmarks/startup_spread.py [--before e0e6fd2] [--runs 8] [--out benchmarks/results/cpu-startup/spread.txt]

Each run is `fabricbench train <the cpu case> --repeats 1 --target-ci 0` in fresh processes, as
benchmarks/startup_phases.py runs it; the two trees alternate (before, after, before, ...) so that a change
of the machine's load falls on both alike. `--before` is a commit; its tree is exported to a temporary
folder (git archive) with this tree's compiled engine beside it, and run through FB_TREE / PYTHONPATH.
Printed per tree: wall and samples/s as median [min, max], the spread as the coefficient of variation
(stdev / mean) and as the relative half-width of the median's 95% CI (measuring/stats.py, the figure the
project reports as run-to-run); then the ratio of the two spreads with a bootstrap 95% interval. A lever
that shares state between runs would narrow the spread: the ratio's interval then lies below 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.startup_phases import CASES, ONE_RUN  # noqa: E402


def export(commit: str, into: Path) -> Path:
    """`commit`'s tree under `into`, with this tree's compiled engine (gitignored) copied in."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for so in (ROOT / "fabricbench").glob("_engine*.so"):
        shutil.copy2(so, into / "fabricbench" / so.name)
    return into


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that runs `tree`'s fabricbench, in the command and in every rank it starts.

    PYTHONPATH alone is not enough where fabricbench is installed editable by scikit-build-core: its
    finder sits first in sys.meta_path and sends every `import fabricbench` to the installed tree, so both
    arms ran this tree's code (this script's spread-native run saw "before" records with phases and the
    native model). The finder steps aside for the build folders listed in SKBUILD_EDITABLE_SKIP; checked
    in a fresh process before any run."""
    skip = [str(f.path) for f in sys.meta_path
            if type(f).__module__.startswith("_editable_skbc_") and getattr(f, "path", None)]
    env = {**os.environ, "FB_TREE": str(tree), "PYTHONPATH": str(tree)}
    if skip:
        env["SKBUILD_EDITABLE_SKIP"] = os.pathsep.join([*skip, os.environ.get("SKBUILD_EDITABLE_SKIP", "")])
    got = subprocess.run([sys.executable, "-c", "import fabricbench; print(fabricbench.__file__)"], env=env,
                         capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    if not got.stdout.strip().startswith(str(tree)):
        raise SystemExit(f"cannot run the tree {tree}: fabricbench is imported from "
                         f"{got.stdout.strip() or got.stderr}")
    return env


def once(env: dict[str, str], argv: list[str]) -> tuple[float, float, float]:
    """One run of the case under a tree's environment (tree_env) -> (wall s, samples/s, CPU s of the command
    and all its processes: less moved by the machine's load than the wall)."""
    with tempfile.TemporaryDirectory(prefix="startup-spread-") as tmp:
        out = Path(tmp) / "t.jsonl"
        t, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([sys.executable, "-m", "fabricbench", "train", *argv, *ONE_RUN, "--out", str(out)],
                           capture_output=True, text=True, timeout=900, env=env, cwd=tmp)
        wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0 or not out.exists():
            raise SystemExit(f"train under {env['FB_TREE']} failed ({p.returncode}): "
                             f"{(p.stderr or p.stdout)[-1500:]}")
        rec = json.loads(out.read_text().splitlines()[-1])
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, float(rec["throughput"]["samples_per_s"]), cpu


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs)


def ratio_interval(a: list[float], b: list[float], n: int = 2000) -> tuple[float, float]:
    """Bootstrap 95% interval of cv(b) / cv(a), resampling each tree's runs."""
    rng = random.Random(0)
    rs = sorted(cv(rng.choices(b, k=len(b))) / max(cv(rng.choices(a, k=len(a))), 1e-12) for _ in range(n))
    return rs[int(0.025 * n)], rs[int(0.975 * n) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="e0e6fd2", help="the commit to compare with (default: before issue 38)")
    ap.add_argument("--runs", type=int, default=8, help="runs per tree")
    ap.add_argument("--case", choices=sorted(CASES), default="cpu")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.runs < 3:
        raise SystemExit("--runs must be at least 3 (a spread of fewer says nothing)")
    from fabricbench.measuring.stats import summarize

    argv = CASES[a.case][0]
    with tempfile.TemporaryDirectory(prefix="startup-before-") as tmp:
        envs = {"before": tree_env(export(a.before, Path(tmp))), "after": tree_env(ROOT)}  # each checked once
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in envs}
        load0 = os.getloadavg()[0]
        for _ in range(a.runs):
            for name, env in envs.items():
                got[name].append(once(env, argv))
    lines = [f"# {os.cpu_count()} CPUs, load {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end; "
             f"before = {a.before}, after = this tree; {a.runs} runs each, alternating",
             f"# fabricbench train {' '.join(argv)} {' '.join(ONE_RUN[:-1])}"]
    sps = {}
    for name, runs in got.items():
        walls, sps[name], cpus = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
        half = summarize(sps[name]).ci95_rel  # None where too few runs for the interval
        lines.append(f"  {name:<7} wall {statistics.median(walls):6.2f} s [{min(walls):.2f}, {max(walls):.2f}]  "
                     f"CPU {statistics.median(cpus):6.2f} s  samples/s {statistics.median(sps[name]):7.2f} "
                     f"[{min(sps[name]):.2f}, {max(sps[name]):.2f}]  "
                     f"cv {cv(sps[name]):6.1%}  median CI " + (f"±{half:.1%}" if half is not None else "n/a"))
    lo, hi = ratio_interval(sps["before"], sps["after"])
    lines.append(f"  spread ratio cv(after)/cv(before) = {cv(sps['after']) / cv(sps['before']):.2f} "
                 f"(bootstrap 95%: {lo:.2f} - {hi:.2f}); an interval below 1 would say the runs share state")
    print("\n".join(lines))
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
