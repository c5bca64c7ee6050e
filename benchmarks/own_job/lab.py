"""Your own job on another fabric: two plain PyTorch loops (ddp_loop.py, fsdp2_loop.py), each profiled once on
the reference fabric, run under `fabricbench exec` on it and on shaped rates, and predicted from the trace by
`fabricbench relate --trace` with the sweeps `fabricbench sweep --for-trace` measured on each fabric.

    python3 benchmarks/own_job/lab.py --device cpu --ranks 2 --rates 2gbit,1gbit --out benchmarks/own_job/results/cpu
    python3 benchmarks/own_job/lab.py --device cuda --ranks 3 --rates 4gbit,2gbit --out OUT      (3 gloo ranks, GPU 0)
    python3 benchmarks/own_job/lab.py --summarize OUT                           (the figures again, nothing run)

Per script, in this order:
  1. exec --fabric default -- torchrun SCRIPT --profile OUT/prof/SCRIPT   (the reference's trace, one per rank)
  2. --repeats rounds of: exec --fabric F -- torchrun SCRIPT --result OUT/runs/SCRIPT-F-R.json for F in default
     and the rates (each round visits every fabric once, so slow drift of the host spreads over all of them);
     the observed step is the script's own median over its timed steps (each step's slowest rank)
  3. sweep --for-trace OUT/prof/SCRIPT --fabric F --out OUT/sweeps/SCRIPT.jsonl for every F
  4. relate --trace OUT/prof/SCRIPT OUT/sweeps/SCRIPT.jsonl --reference default --json (and its table)

A point is one run on a shaped rate. Its prediction is the reference's observed step (the median of the
default runs' medians, unprofiled like the point itself) plus what relate predicts the fabric adds to a step
(its predicted step on that fabric less its step on the reference), and its interval the same sum with the
ends of relate's 95% interval of that step. Why the added time and not relate's step itself: the profiler's
own cost (record_shapes, one event per op) lengthens the trace's steps, in compute, not on the wire, and a
user asks what the fabric does to the job they run without it; the added time depends on the trace's
communication and its overlap, not on how long its compute took. relate's own predicted step and the
prediction as the reference's step times relate's predicted slowdown are printed beside it, with their
figures, for comparison. Residual = predicted / observed - 1. The bar: median |residual| <= 5%, largest
<= 10%, coverage of the intervals >= 80%, over >= 8 points.

Which interval a point is judged against (fixed before the lab with three reference runs was run): a point
observes ONE run, so its 95% interval is a prediction interval for one run, not relate's interval alone.
relate's interval holds what relate does not know (the trace's calls, the sweeps); the point adds two
things it cannot hold: the reference's step is the median of n runs, not the job's true step, and the run
observed scatters around its own fabric's step. Both come from the reference's n unprofiled runs, the only
runs no point observes: their relative standard deviation s, with Student's t at n - 1 degrees of freedom,
gives m = t(0.975, n - 1) * s * sqrt(1 + 1/n) of the prediction (the same relative spread assumed on every
fabric), added to each side of relate's interval in quadrature. With n = 2 (one degree of freedom, t = 12.7)
m says nothing, so below three reference runs a point keeps relate's interval alone, as labs before this rule
did; run with --repeats 3 or more. Coverage against relate's interval alone is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fabricbench.statistics.comparison import t_crit

HERE = Path(__file__).resolve().parent
SCRIPTS = {"ddp": HERE / "ddp_loop.py", "fsdp2": HERE / "fsdp2_loop.py"}
BAR = {"median": 0.05, "largest": 0.10, "coverage": 0.80, "points": 8}
FB = [sys.executable, "-m", "fabricbench"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv: list[str], logfile: Path, timeout_s: float) -> int:
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(logfile, "a") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
    log(f"rc {rc} in {time.monotonic() - t0:.1f} s: {' '.join(a if len(a) < 60 else '...' + a[-40:] for a in argv)}")
    return rc


def job(args, script: str, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.ranks),
            str(SCRIPTS[script]), "--device", args.device, "--steps", str(args.steps), "--warmup", str(args.warmup),
            *args.model_args.split(), *extra]


def fabrics(args) -> list[str]:
    return ["default", *[f"shaped:{r}" for r in args.rates.split(",")]]


def tag(fabric: str) -> str:
    return fabric.replace(":", "-")


def measure(args, out: Path) -> None:
    logs = out / "logs"
    for script in args.scripts.split(","):
        prof = out / "prof" / script
        run([*FB, "exec", "--fabric", "default", "--timeout", str(args.job_timeout), "--out", str(out / "exec.jsonl"),
             "--", *job(args, script, ["--profile", str(prof), "--result", str(out / "runs" / f"{script}-profile.json")])],
            logs / f"{script}-profile.log", args.job_timeout + 30)
        for r in range(1, args.repeats + 1):
            for f in fabrics(args):
                res = out / "runs" / f"{script}-{tag(f)}-{r}.json"
                run([*FB, "exec", "--fabric", f, "--timeout", str(args.job_timeout), "--out", str(out / "exec.jsonl"),
                     "--", *job(args, script, ["--result", str(res)])], logs / f"{script}-{tag(f)}-{r}.log",
                    args.job_timeout + 30)
        for f in fabrics(args):
            run([*FB, "sweep", "--for-trace", str(prof), "--fabric", f, "--out", str(out / "sweeps" / f"{script}.jsonl")],
                logs / f"{script}-sweep-{tag(f)}.log", 600)
        relate(out, script)


def relate(out: Path, script: str, lab: Path | None = None) -> None:
    """relate --trace of `script` on out/sweeps, its answer in out; lab: where the traces are (default out)."""
    base = [*FB, "relate", "--trace", str((lab or out) / "prof" / script), str(out / "sweeps" / f"{script}.jsonl"),
            "--reference", "default"]
    with open(out / f"relate-{script}.json", "w") as fh:
        subprocess.run([*base, "--json"], stdout=fh, stderr=subprocess.DEVNULL, timeout=300,
                       env={**os.environ, "COLUMNS": "250"})
    with open(out / f"relate-{script}.txt", "w") as fh:
        subprocess.run(base, stdout=fh, stderr=subprocess.STDOUT, timeout=300, env={**os.environ, "COLUMNS": "250"})


def _median_of(paths: list[Path]) -> list[float]:
    return [json.loads(p.read_text())["median_step_s"] for p in paths if p.exists()]


def _one_run_margin(ref: list[float]) -> float | None:
    """The relative half-width one run adds to a prediction (module docstring): t(0.975, n-1) * s * sqrt(1 + 1/n)
    from the reference's n runs; None with fewer than three (module docstring)."""
    n = len(ref)
    if n < 3:
        return None
    s = statistics.stdev(ref) / statistics.fmean(ref)
    return t_crit(0.05, n - 1) * s * math.sqrt(1 + 1 / n)


def _widened(pred: float, lo: float | None, hi: float | None, margin: float | None) -> list[float | None]:
    """relate's interval [lo, hi] around pred with one run's margin (relative) added to each side in quadrature;
    relate's alone where there is no margin."""
    if lo is None or hi is None:
        return [None, None]
    if margin is None:
        return [lo, hi]
    m = margin * pred
    return [pred - math.hypot(pred - lo, m), pred + math.hypot(hi - pred, m)]


def _figures(points: list[dict], key: str, inside: str) -> dict:
    errs = [abs(p[key]) for p in points]
    return {"points": len(points), "median_abs": statistics.median(errs), "largest_abs": max(errs),
            "coverage": sum(bool(p[inside]) for p in points) / len(points)}


def _verdict(f: dict) -> str:
    ok = (f["points"] >= BAR["points"] and f["median_abs"] <= BAR["median"] and f["largest_abs"] <= BAR["largest"]
          and f["coverage"] >= BAR["coverage"])
    return "meets the bar" if ok else "misses the bar"


def whole_bucket(out: Path) -> dict:
    """The lab's points again from the same traces, runs and back-to-back sweeps, without the gapped sweeps
    (out/whole-bucket/): relate then takes a whole token bucket per gap. Paired with out's own figures, this
    is what measuring the link credit changed."""
    dest = out / "whole-bucket"
    (dest / "sweeps").mkdir(parents=True, exist_ok=True)
    for f in sorted((out / "sweeps").glob("*.jsonl")):
        kept = [ln for ln in f.read_text().splitlines() if ln.strip() and not _gapped(json.loads(ln))]
        (dest / "sweeps" / f.name).write_text("".join(ln + "\n" for ln in kept))
        relate(dest, f.stem, lab=out)
    return summarize(dest, runs=out / "runs")


def _gapped(rec: dict) -> bool:
    extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
    return bool(extra.get("gap_s") or (extra.get("settings") or {}).get("gap_s"))


def summarize(out: Path, runs: Path | None = None) -> dict:
    """The points of out's relate answers against the runs (default out/runs); written to out."""
    runs = runs or out / "runs"
    points, notes = [], []
    lines = [f"{'script':7} {'fabric':14} {'run':>3} {'observed':>9} {'predicted':>9} {'[one run 95%]':>17} "
             f"{'residual':>8} {'in PI':>5} {'in CI':>5} | {'x slowdown':>10} {'resid':>7} | "
             f"{'relate step':>11} {'resid':>7}"]
    for rel in sorted(out.glob("relate-*.json")):
        script = rel.stem.split("-", 1)[1]
        try:
            doc = json.loads(rel.read_text())
        except json.JSONDecodeError:
            notes.append(f"{script}: relate wrote no JSON (see relate-{script}.txt)")
            continue
        rows = {r["fabric"]: r for r in doc.get("rows", [])}
        ref = _median_of(sorted(runs.glob(f"{script}-default-*.json")))
        if not ref or "default" not in rows:
            notes.append(f"{script}: no run on the reference finished, or relate has no reference row")
            continue
        obs_ref, trace_ref = statistics.median(ref), rows["default"]["predicted_step_s"]
        one_run = _one_run_margin(ref)
        lines.append(f"{script:7} {'default':14} {'ref':>3} {obs_ref * 1e3:7.1f}ms  the median of {len(ref)} runs ("
                     + ", ".join(f"{x * 1e3:.1f}" for x in ref) + f" ms); the trace's step {trace_ref * 1e3:.1f} ms; "
                     + (f"one run's margin +-{one_run:.1%}" if one_run is not None else "one run's margin unknown"))
        for fabric, row in rows.items():
            if fabric == "default":
                continue
            step, ci = row["predicted_step_s"], row.get("predicted_step_ci95") or [None, None]
            slow, sci = row.get("predicted_slowdown"), row.get("predicted_slowdown_ci95") or [None, None]
            for res in sorted(runs.glob(f"{script}-{tag(fabric)}-*.json")):
                obs = json.loads(res.read_text())["median_step_s"]
                pred = obs_ref + step - trace_ref
                lo, hi = (obs_ref + ci[0] - trace_ref, obs_ref + ci[1] - trace_ref) if None not in ci else (None, None)
                by_slow = obs_ref * slow
                pi = _widened(pred, lo, hi, one_run)
                p = {"script": script, "fabric": fabric, "run": res.stem.rsplit("-", 1)[1], "observed_s": obs,
                     "reference_observed_s": obs_ref, "trace_reference_step_s": trace_ref, "predicted_s": pred,
                     "ci95_s": [lo, hi], "residual": pred / obs - 1,
                     "one_run_pi95_s": pi, "inside": pi[0] is not None and pi[0] <= obs <= pi[1],
                     "inside_relate_ci": lo is not None and lo <= obs <= hi,
                     "by_slowdown_s": by_slow, "by_slowdown_residual": by_slow / obs - 1,
                     "by_slowdown_inside": None not in sci and obs_ref * sci[0] <= obs <= obs_ref * sci[1],
                     "relate_predicted_step_s": step, "relate_residual": step / obs - 1,
                     "relate_inside": None not in ci and ci[0] <= obs <= ci[1], "flags": row.get("flags")}
                points.append(p)
                cis = f"[{pi[0] * 1e3:.1f}-{pi[1] * 1e3:.1f}]" if pi[0] is not None else "[-]"
                lines.append(f"{script:7} {fabric:14} {p['run']:>3} {obs * 1e3:7.1f}ms {pred * 1e3:7.1f}ms {cis:>17} "
                             f"{p['residual']:+8.1%} {'yes' if p['inside'] else 'no':>5} "
                             f"{'yes' if p['inside_relate_ci'] else 'no':>5} | {by_slow * 1e3:8.1f}ms "
                             f"{p['by_slowdown_residual']:+7.1%} | {step * 1e3:9.1f}ms {p['relate_residual']:+7.1%}")
    summary: dict = {"points": len(points)}
    if points:
        summary.update(_figures(points, "residual", "inside"))
        summary["verdict"] = _verdict(summary)
        summary["by_slowdown"] = _figures(points, "by_slowdown_residual", "by_slowdown_inside")
        summary["relate_step"] = _figures(points, "relate_residual", "relate_inside")
        summary["relate_ci_coverage"] = _figures(points, "residual", "inside_relate_ci")["coverage"]
        lines.append("")
        lines.append(f"{len(points)} points: median |error| {summary['median_abs']:.1%} (bar {BAR['median']:.0%}), "
                     f"largest {summary['largest_abs']:.1%} (bar {BAR['largest']:.0%}), coverage "
                     f"{summary['coverage']:.0%} (bar {BAR['coverage']:.0%}), at least {BAR['points']} points: "
                     f"{summary['verdict']}")
        lines.append(f"  coverage against one run's prediction interval (the bar's); against relate's interval alone: "
                     f"{summary['relate_ci_coverage']:.0%}")
        for key, words in (("by_slowdown", "the reference's step x relate's slowdown"),
                           ("relate_step", "relate's own predicted step (profiled)")):
            f = summary[key]
            lines.append(f"  for comparison, {words}: median |error| {f['median_abs']:.1%}, largest "
                         f"{f['largest_abs']:.1%}, coverage {f['coverage']:.0%}")
    lines += [f"note: {n}" for n in notes]
    text = "\n".join(lines)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    (out / "points.json").write_text(json.dumps({"summary": summary, "points": points}, indent=2) + "\n")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rates", default="2gbit,1gbit", help="shaped rates, comma-separated")
    ap.add_argument("--repeats", type=int, default=2, help="runs per fabric (each a point on a shaped rate)")
    ap.add_argument("--scripts", default="ddp,fsdp2")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--model-args", default="", help="passed to each script, e.g. '--dim 128 --layers 2'")
    ap.add_argument("--job-timeout", type=int, default=240, help="exec --timeout of each run")
    ap.add_argument("--out", type=Path, help="folder for everything the lab writes")
    ap.add_argument("--summarize", type=Path, default=None, help="only print the figures of this folder")
    ap.add_argument("--whole-bucket", type=Path, default=None,
                    help="a lab folder's points again without its gapped sweeps (into FOLDER/whole-bucket)")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.summarize)
        return
    if args.whole_bucket:
        whole_bucket(args.whole_bucket)
        return
    if args.out is None:
        ap.error("--out is required unless --summarize")
    for sub in ("runs", "prof", "sweeps", "logs"):
        (args.out / sub).mkdir(parents=True, exist_ok=True)
    (args.out / "lab.json").write_text(json.dumps({k: str(v) for k, v in vars(args).items()}, indent=2) + "\n")
    t0 = time.monotonic()
    measure(args, args.out)
    summarize(args.out)
    log(f"lab took {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
