"""The one-GPU lab where the wire matters: the choice of model, batch and shaped rates with its
arithmetic, the sweep plan from the reference's traces, and the checker of relate's bar.

    python3 benchmarks/relate/gpu_lab.py arithmetic               # the choice below, computed
    python3 benchmarks/relate/gpu_lab.py plan OUT/lab/train-default-n2.jsonl   # "DTYPE OPS SIZES" per line
    python3 benchmarks/relate/gpu_lab.py check OUT --strategies ddp,zero2,fsdp --ranks 3 --rates 4gbit,2gbit
                                    # relate.txt/.json, median and largest |error|, coverage, the bar

benchmarks/relate/gpu_lab.sh runs the lab (N gloo ranks with CUDA tensors on one H200, shaped fabrics
in network namespaces) and calls `plan` and `check`.

The choice. The one-GPU lab's step is host-bound: the first one-GPU run (tiny-mistral, 2 gloo ranks, bf16,
batch 4) had the GPU busy 1-2% of a 16 ms (DDP), 25 ms (ZeRO-2) and 32 ms (FSDP) step, and sent 0.43 MB
per step, so no fabric could matter (2gbit: 3 ms). The host's time per step depends on the layers (kernels
launched), not on their width, so a wider model of the same depth keeps the step and multiplies what it
sends: lab-mistral (2 layers, hidden 128, MLP 384, vocab 1024, Ψ = 6.56e5) sends, per step (DOMAIN.md
"What the frameworks really send"), DDP 4Ψ = 2.62 MB of fp32 gradients (all-reduce), ZeRO-2 2Ψ bf16
all-reduce + 2Ψ bf16 all-gather (1.31 + 1.31 MB), FSDP2 about 1.71 × 2Ψ bf16 all-gather + 2Ψ bf16
reduce-scatter (2.24 + 1.31 MB; gloo's reduce-scatter is a full all-reduce). On a shaped loopback every
rank's bytes share lo's one queue at rate R, so a ring collective of S bytes on n ranks takes

    all-reduce 2(n − 1) S / R,   all-gather and reduce-scatter-as-all-reduce (n − 1) S / R and 2(n − 1) S / R

(busbw = R/2 on 2 ranks, R/3 on 3: the first one-GPU lab's sweep measured 0.125 GB/s all-reduce busbw at 2gbit). With
the steps above as compute, `arithmetic` prints T_comm and its share of the step, T_comm / (compute +
T_comm), for every strategy, rank count and rate: at shaped:4gbit and shaped:2gbit 11 of the 12 cells lie
in 20-60% (DDP on 3 ranks at 2gbit 72%, before any overlap hides part of it), at 8gbit ZeRO-2 and FSDP on 2
ranks fall to 14%, at 1gbit most cells pass 60%. The unshaped lab moves 2.6 MB in ~2 ms (gloo through host
memory, ~1.5-2 GB/s busbw), so both rates are 5-10× slower than the reference, and a token bucket of 256 KiB
is worth 0.5 and 1 ms at them: small against collectives of 10-40 ms, so the link credit (relating/credit.py)
is a minor term here. Batch 8 × 256 tokens per rank: more GPU work than the first run's, still host-bound.

The lab of the script's defaults: the 3 strategies on 3 ranks under shaped:4gbit, 2gbit, 3gbit and
6gbit, 12 held-out points in 9 minutes (the script's header says why one rank count); at 3 ranks every cell
but DDP at 3gbit and 2gbit (64%, 72%) lies in 20-60%.

The bar: at least 10 held-out points and every point asked for, median |error| ≤ 5%,
largest ≤ 10%, coverage of the 95% intervals ≥ 80%, a measured e for every reference (no "e=1 upper
bound" flag). `check` prints the same figures for any --model, --rates and --ranks the script was given.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

PSI = 656_000  # lab-mistral's parameters (fabricbench/training/models.py)
COMPUTE_S = {"ddp": 0.016, "zero2": 0.025, "fsdp": 0.032}  # the first one-GPU run's host-bound steps (2 ranks, GPU 0)
# bytes per step per collective kind: (all-reduce-like bytes, all-gather bytes)
SENDS = {"ddp": (4 * PSI, 0), "zero2": (2 * PSI, 2 * PSI), "fsdp": (2 * PSI, int(1.71 * 2 * PSI))}
RATES = {"8gbit": 1e9, "6gbit": 0.75e9, "4gbit": 0.5e9, "3gbit": 0.375e9, "2gbit": 0.25e9,
         "1gbit": 0.125e9}  # bytes per second
BAR = {"median_abs": 0.05, "max_abs": 0.10, "coverage": 0.80, "points": 10, "share": (0.20, 0.60)}
TINY = 1024  # bytes: a dtype whose calls are all this small is swept with the main dtype (plan)


def t_comm(strategy: str, n: int, rate_Bps: float) -> float:
    """Seconds of communication per step on a shaped loopback (one queue for every rank's bytes)."""
    reduce_bytes, gather_bytes = SENDS[strategy]
    return (2 * (n - 1) * reduce_bytes + (n - 1) * gather_bytes) / rate_Bps


def arithmetic() -> int:
    print(f"lab-mistral, Ψ = {PSI:.3g}; compute per step (the first one-GPU run, host-bound): "
          + ", ".join(f"{s} {c * 1e3:.0f} ms" for s, c in COMPUTE_S.items()))
    print(f"{'rate':<8}{'strategy':<9}{'n':>3}{'T_comm ms':>11}{'share':>8}  in 20-60%")
    for name, rate in RATES.items():
        for strategy, compute in COMPUTE_S.items():
            for n in (2, 3):
                t = t_comm(strategy, n, rate)
                share = t / (compute + t)
                ok = BAR["share"][0] <= share <= BAR["share"][1]
                print(f"{name:<8}{strategy:<9}{n:>3}{t * 1e3:>11.1f}{share:>8.0%}  {'yes' if ok else 'no'}")
    return 0


def plan(files: list[str]) -> int:
    """The sweeps the traces need, as "DTYPE OPS SIZES" lines for the shell: relating/lab.py's sweep_plan,
    in the trace's own dtypes (gloo's reduction of bfloat16 may run at another speed than float32's at the
    same bytes, and only a sweep of that dtype shows it), sizes bracketing every traced size at the run's
    ranks.
    One exception, to spare a sweep's start-up (~10 s): a dtype whose every call is at most TINY bytes
    (ZeRO's overflow flags) costs a call's latency whatever its type; it is swept with the dtype of the
    most bytes (its sizes included there), and relate prices it from that curve, flagged "dtype
    substituted". Lines starting with # say what was folded."""
    from fabricbench.relating.lab import sweep_plan

    recs = [json.loads(line) for f in files for line in Path(f).read_text().splitlines() if line.strip()]
    trains = [r for r in recs if r.get("kind") == "train" and r.get("status") == "ok"]
    colls = [c for r in trains for c in (r.get("comm") or {}).get("collectives") or [] if c.get("bytes", 0) > 0]
    if not colls:
        print("# no traced collective: nothing to sweep")
        return 1
    weight: dict[str, float] = {}
    for c in colls:
        weight[c["dtype"]] = weight.get(c["dtype"], 0.0) + c["bytes"] * (c.get("calls_per_step") or 1)
    main = max(weight, key=weight.__getitem__)
    for dtype in sorted(weight):
        largest = max(c["bytes"] for c in colls if c["dtype"] == dtype)
        if dtype != main and largest <= TINY:
            print(f"# {dtype}: every call at most {largest} B (latency-bound): swept as {main}")
            for c in colls:
                if c["dtype"] == dtype:
                    c["dtype"] = main
    for dtype, ops, sizes in sweep_plan(trains):
        print(dtype, ",".join(ops), ",".join(map(str, sizes)))
    return 0


def check(out: Path, asked: list[tuple[str, int, str]], *, write: bool = True) -> int:
    """relate over every record under OUT/lab, written as OUT/relate.txt and OUT/relate.json (the CLI's own
    output; not with write=False, which keeps a run's files as it wrote them), then the held-out points, the
    figures (median and largest |error|, coverage of the 95% intervals) and the bar, one line each; exit 1
    if missed. `asked`: the (strategy, ranks, fabric) points the lab was asked for, so that a point that is
    missing is named."""
    import contextlib

    import fabricbench
    from fabricbench.cli import main as cli

    files = sorted(str(p) for p in (out / "lab").glob("*.jsonl"))
    # the CLI's own output, in this process (a fresh one costs an import of torch): the table with its
    # notes, and the JSON (its notes apart, so that relate.json stays one JSON document)
    outputs = (("relate.txt", "relate.txt", []), ("relate.json", "relate-notes.txt", ["--json"])) if write else ()
    for name, notes, extra in outputs:
        with open(out / name, "w") as fh, open(out / notes, "a") as err, contextlib.redirect_stdout(fh), \
                contextlib.redirect_stderr(fh if notes == name else err):
            try:
                cli(["relate", *files, "--reference", "default", *extra])
            except SystemExit:  # relate's exit 1 (nothing related) is judged below
                pass
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=files, reference="default"))
    held = [r for r in res.rows if r.fabric != r.reference and r.residual is not None]
    print(f"relate: {len(res.rows)} rows, {len(held)} held-out points (observed off the reference)")
    print(f"{'strategy':<9}{'n':>3} {'fabric':<14}{'obs ms':>8}{'pred ms':>9}{'[95% interval]':>20}{'error':>8}"
          f"{'comm share':>11}{'e':>6}  flags")
    for r in held:
        lo, hi = r.predicted_step_ci95 or (float("nan"), float("nan"))
        share = r.comm_time_s / r.observed_step_s if r.observed_step_s else float("nan")
        print(f"{r.strategy:<9}{r.nranks:>3} {r.fabric:<14}{r.observed_step_s * 1e3:>8.1f}{r.predicted_step_s * 1e3:>9.1f}"
              f"{f'[{lo * 1e3:.1f}-{hi * 1e3:.1f}]':>20}{r.residual * 100:>+7.1f}%{share:>11.0%}"
              f"{r.exposed_fraction:>6.2f}  {', '.join(r.flags)}")
    cov = res.coverage
    print(f"figures: {cov.summary()}")
    if not held:
        print("bar: MISSED (nothing to judge)")
        return 1
    got = {(r.strategy, r.nranks, r.fabric) for r in held}
    gone = [a for a in asked if a not in got]
    missing = [f"{s} n={n} {f}" for s, n, f in gone]
    # the points that must be there: every strategy and rank count at the first two rates asked
    # (ZeRO-2 and FSDP at 3 ranks, both 4gbit and 2gbit); the further rates are what the budget allows
    required = list(dict.fromkeys(f for _, _, f in asked))[:2]
    lacking = [a for a in gone if a[2] in required]
    upper = sorted({f"{r.strategy} n={r.nranks}" for r in res.rows if "e=1 upper bound" in r.flags})
    in_share = [r for r in held if BAR["share"][0] <= r.comm_time_s / r.observed_step_s <= BAR["share"][1]]
    checks = [
        ("points", len(held) >= BAR["points"] and not lacking,
         f"{len(held)} of {len(asked)} asked, at least {BAR['points']} and every one at {' and '.join(required)}"
         + (f" (missing: {', '.join(missing)})" if missing else "")),
        ("median |error|", cov.median_abs <= BAR["median_abs"], f"{cov.median_abs:.1%}"),
        ("largest |error|", cov.max_abs <= BAR["max_abs"], f"{cov.max_abs:.1%}"),
        ("coverage", (cov.fraction or 0) >= BAR["coverage"], f"{cov.covered} of {cov.points} ({cov.fraction:.0%})"),
        ("measured e", not upper, "every reference" if not upper else f"e = 1 assumed for {', '.join(upper)}"),
    ]
    for name, ok, what in checks:
        print(f"bar {name}: {what}: {'ok' if ok else 'MISSED'}")
    print(f"comm share 20-60% (the lab's design, not judged): {len(in_share)} of {len(held)} points")
    noise_floor(res)
    for line in cov.outside:
        print(f"outside its interval: {line}")
    from fabricbench.relating import inputs

    got = inputs.load(files)
    host_during(got.trains)
    own_calls_everywhere(got)
    return 0 if all(ok for _, ok, _ in checks) else 1


def noise_floor(res) -> None:
    """Diagnostic, not judged: each reference's step and its 95% interval (run to run over its runs, never
    narrower than their own: inputs._step_ci), which every prediction of that strategy carries: a drifted
    reference run shows here first (an H100 lab: ±2,800% over two runs, one on a machine just started)."""
    parts = []
    for r in res.rows:
        if r.fabric != r.reference or not r.predicted_step_ci95 or not r.observed_step_s:
            continue
        rel = max(r.predicted_step_ci95[1] / r.observed_step_s - 1, 1 - r.predicted_step_ci95[0] / r.observed_step_s)
        parts.append(f"{r.strategy} n={r.nranks} {r.observed_step_s * 1e3:.1f} ms ±{rel:.1%} ({r.runs or 1} runs)")
    if parts:
        print(f"reference steps (under every point of their strategy; not judged): {'; '.join(parts)}")


def host_during(trains) -> None:
    """Diagnostic, not judged: what else used the host's CPUs during the train runs (hostload.py: other
    processes in the VM, and the hypervisor's steal time), the most of each and whose run; a run whose step
    drifted with neither high was slowed by something neither sees (caches, memory bandwidth, the GPU)."""
    from fabricbench import hostload

    loads = [(r, d) for r in trains if (d := hostload.of(r))]
    if not loads:
        return
    parts = []
    for key, what in (("others_cpus", "other processes"), ("steal_cpus", "steal time")):
        got = [(d[key], r) for r, d in loads if isinstance(d.get(key), (int, float))]
        if got:
            v, r = max(got, key=lambda x: x[0])
            parts.append(f"{what} up to {v:.2f} CPUs ({r.strategy} on {r.fabric})")
        else:
            parts.append(f"{what} not read")
    busy = sum(bool(d.get("busy")) for _, d in loads)
    print(f"host during the {len(loads)} train runs (not judged): {'; '.join(parts)}; busy: {busy} "
          f"(from {loads[0][1].get('threshold_cpus')} CPUs)")


def own_calls_everywhere(got) -> None:
    """Diagnostic, not judged and not used by any prediction: each traced run's own calls against its own
    fabric's sweep, per op: the median ratio t_call / t_sweep and the median difference t_call - t_sweep.
    relate calibrates by the reference's ratio on every fabric (calls.py); whether the ratio or the
    difference holds across fabrics says whether that calibration should scale or add."""
    import statistics

    from fabricbench.relating import calls as own_calls
    from fabricbench.relating import inputs
    from fabricbench.relating import job as jobs
    from fabricbench.relating.curves import SweepCurves
    from fabricbench.relating.pricing import price

    curves = SweepCurves.from_records(jobs.split(got.collectives)[0])
    observed, _ = inputs.observations(got.trains)
    print("own calls against their own fabric's sweep (diagnostic): strategy n fabric: op ratio [difference ms]")
    for o in observed:
        comms = [c for c in (o.comms or ((o.comm,) if o.comm else ())) if c.get("calls")]
        if not comms or o.fabric not in curves.fabrics():
            continue
        pricing = price(comms[0].get("collectives") or [], curves, fabric=o.fabric, nranks=o.workload.nranks)
        found, _ = own_calls.ratios(comms, pricing)
        per_op: dict[str, list[tuple[float, float]]] = {}
        for c in found:
            per_op.setdefault(c.op, []).append((c.ratio, (c.ratio - 1) * c.swept_s * 1e3))
        parts = [f"{op} {statistics.median(r for r, _ in v):.2f}x [{statistics.median(d for _, d in v):+.2f} ms]"
                 for op, v in per_op.items()]
        print(f"  {o.strategy} {o.workload.nranks} {o.fabric}: {', '.join(parts) or 'no solo call priced'}")


def _asked(strategies: str, ranks: str, rates: str) -> list[tuple[str, int, str]]:
    from fabricbench.fabrics import get_fabric

    fabrics = [get_fabric(f"shaped:{r}").name for r in rates.split(",") if r]
    return [(s, int(n), f) for n in ranks.split(",") if n for f in fabrics for s in strategies.split(",") if s]


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `check DIR | head` ends quietly, as a Unix filter does
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("arithmetic")
    p = sub.add_parser("plan")
    p.add_argument("files", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("out")
    c.add_argument("--strategies", default="zero2,fsdp,ddp")
    c.add_argument("--ranks", default="3")
    c.add_argument("--rates", default="4gbit,2gbit,3gbit,6gbit")
    c.add_argument("--reread", action="store_true", help="print the figures only: leave OUT's relate.txt, "
                   "relate.json and relate-notes.txt as the run wrote them (a copied-back run read again)")
    args = ap.parse_args()
    if args.what == "arithmetic":
        return arithmetic()
    if args.what == "plan":
        return plan(args.files)
    return check(Path(args.out), _asked(args.strategies, args.ranks, args.rates), write=not args.reread)


if __name__ == "__main__":
    sys.exit(main())
