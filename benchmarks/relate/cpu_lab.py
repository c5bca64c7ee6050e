"""The CPU fabric lab at a larger scale: more fabrics, strategies and steps than the CI test, then the
predicted/observed table of `fabricbench relate`.

    python3 benchmarks/relate/cpu_lab.py                       # default fabrics, ddp,zero3,fsdp
    python3 benchmarks/relate/cpu_lab.py --fabrics default,shaped:4gbit,shaped:1gbit,shaped:250mbit \
        --strategies ddp,zero1,zero2,zero3,fsdp --steps 10 --out lab/records.jsonl --plot lab/relate.png

Needs root and iproute2 (shaped fabrics are tc-limited loopbacks of network namespaces; without them they
are waived and only the default fabric runs), torch and accelerate (the `train` extra; DeepSpeed for
ZeRO). The records file keeps everything, so `fabricbench relate FILE` redoes the table without measuring.
Prints one line per part with its seconds, the table, and a summary line: the largest |residual| per
strategy over the non-reference fabrics.

    python3 benchmarks/relate/cpu_lab.py --records lab/records.jsonl   # measure nothing: the tables again

Then, the bias the first labs showed: the prediction without the link credit (the model before it: the records' idle
gaps left out) against with it, per row with 95% intervals, and each run's own check of the mechanism:
the communication its trace saw on its fabric (union of gloo's events, peer waits included) against the
sweep's price of the same collectives, and that price less the credit of the run's own idle gaps
(relating/credit.py). Where the credit is the cause, traced ≈ swept − credit on the shaped fabrics.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabrics", default="default,shaped:4gbit,shaped:1gbit,shaped:300mbit,shaped:100mbit",
                    help="comma list; the first is where the traces are taken and the reference")
    ap.add_argument("--strategies", default="ddp,zero3,fsdp")
    ap.add_argument("--model", default="lab-mistral")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--sweep-iters", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=1, help="train runs per fabric, fresh processes, interleaved")
    ap.add_argument("--out", default=None, help="records JSONL (default: a fresh temporary folder)")
    ap.add_argument("--plot", default=None, help="also write the relate figure here (PNG)")
    ap.add_argument("--records", default=None, help="measure nothing: relate these records (a lab's --out)")
    args = ap.parse_args()

    import fabricbench
    from fabricbench.relating.format import render
    from fabricbench.relating.lab import LabConfig, run_lab

    fabrics = [f.strip() for f in args.fabrics.split(",") if f.strip()]
    failed = False
    if args.records:
        out = args.records
    else:
        out = args.out or os.path.join(tempfile.mkdtemp(prefix="fabricbench-lab-"), "records.jsonl")
        config = LabConfig(fabrics=fabrics, strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
                           model=args.model, out=out, nprocs=args.nprocs, steps=args.steps,
                           warmup_steps=args.warmup_steps, batch_size=args.batch_size, seq_len=args.seq_len,
                           sweep_iters=args.sweep_iters, repeats=args.repeats)
        t0 = time.monotonic()
        run = run_lab(config, log=lambda m: print(m, flush=True))
        failed = bool(run.failed)
        print(f"lab: {time.monotonic() - t0:.0f} s in all; records {out}")
        for fab, why in run.waived.items():
            print(f"waived {fab}: {why}")
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=[out], reference=fabrics[0]))
    for p in res.problems:
        print(f"note: {p}")
    render(res)
    if args.plot:
        from fabricbench.relating.plot import plot_relate

        plot_relate(res, args.plot)
        print(f"plot: {args.plot}")
    for s in dict.fromkeys(r.strategy for r in res.rows):
        worst = [r for r in res.rows if r.strategy == s and r.residual is not None and r.fabric != res.reference]
        if worst:
            w = max(worst, key=lambda r: abs(r.residual))
            print(f"{s}: largest |residual| {abs(w.residual) * 100:.0f}% on {w.fabric} "
                  f"(observed slowdown {w.observed_slowdown:.2f}x, predicted {w.predicted_slowdown:.2f}x)")
    print(f"lab: {res.coverage.summary()}")
    records = [json.loads(line) for line in open(out, encoding="utf-8") if line.strip()]
    before_after(records, fabrics[0])
    own_check(records)
    return 1 if failed else 0


def _ci(ci) -> str:
    return f"[{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "[-]"


def before_after(records: list[dict], reference: str) -> None:
    """Rows without the link credit (the records' idle gaps left out: the model before it) and with it."""
    import fabricbench

    bare = copy.deepcopy(records)
    for r in bare:
        tl = (r.get("comm") or {}).get("timeline") if r.get("kind") == "train" else None
        if isinstance(tl, dict):
            tl.pop("idle_gaps_s", None)
            tl.pop("idle_gap_steps", None)
    before = {(r.strategy, r.fabric): r
              for r in fabricbench.relate(fabricbench.RelateConfig(inputs=bare, reference=reference)).rows}
    after = fabricbench.relate(fabricbench.RelateConfig(inputs=records, reference=reference))
    print("\nthe bias: step N× slower than on the reference, observed and predicted without / with the link credit")
    print(f"{'strategy':<9}{'fabric':<16}{'observed':>20}{'before':>20}{'resid':>7}{'credit ms':>10}{'after':>20}{'resid':>7}")
    res_b, res_a = [], []
    for r in after.rows:
        if r.fabric == after.reference or r.observed_slowdown is None:
            continue
        b = before[(r.strategy, r.fabric)]
        res_b.append(b.residual)
        res_a.append(r.residual)
        print(f"{r.strategy:<9}{r.fabric:<16}"
              f"{f'{r.observed_slowdown:.2f}× {_ci(r.observed_slowdown_ci95)}':>20}"
              f"{f'{b.predicted_slowdown:.2f}× {_ci(b.predicted_slowdown_ci95)}':>20}{b.residual * 100:>+6.0f}%"
              f"{r.link_credit_s * 1e3:>10.1f}"
              f"{f'{r.predicted_slowdown:.2f}× {_ci(r.predicted_slowdown_ci95)}':>20}{r.residual * 100:>+6.0f}%")
    if res_a:
        def mean(v):
            return sum(v) / len(v) * 100

        print(f"{len(res_a)} rows: mean residual {mean(res_b):+.0f}% before, {mean(res_a):+.0f}% after; mean |residual| "
              f"{mean([abs(x) for x in res_b]):.0f}% before, {mean([abs(x) for x in res_a]):.0f}% after")


def own_check(records: list[dict]) -> None:
    """Each run on its own fabric: traced communication against the sweep's price, less the credit of
    the run's own idle gaps (as profiled)."""
    from fabricbench.relating.credit import Gaps, bucket_s
    from fabricbench.relating.curves import SweepCurves
    from fabricbench.relating.pricing import price
    from fabricbench.results.schema import CollectiveResult

    typed = [CollectiveResult.from_record(r) for r in records if r.get("kind") == "collective"]
    curves = SweepCurves.from_records(typed)
    print("\neach run's traced communication on its own fabric (ms per step, mean over ranks) against its sweep")
    print(f"{'strategy':<9}{'fabric':<16}{'traced':>8}{'swept':>8}{'credit':>8}{'swept-credit':>13}"
          f"{'traced/swept':>13}{'traced/(swept-credit)':>22}")
    for r in records:
        comm = r.get("comm") or {} if r.get("kind") == "train" and r.get("status") == "ok" else {}
        tl = comm.get("timeline")
        if not isinstance(tl, dict) or not comm.get("collectives"):
            continue
        p = price(comm["collectives"], curves, fabric=r.get("fabric") or "default", nranks=r.get("nranks"))
        gaps = Gaps.from_timeline(tl, (comm.get("overhead") or {}).get("ratio"))
        credit = gaps.credit(bucket_s=bucket_s(r.get("fabric") or "default"), comm_s=p.time_s, scaled=False) \
            if gaps else 0.0
        if p.time_s <= credit:
            continue
        print(f"{r['strategy']:<9}{r.get('fabric'):<16}{tl['comm_s'] * 1e3:>8.1f}{p.time_s * 1e3:>8.1f}"
              f"{credit * 1e3:>8.1f}{(p.time_s - credit) * 1e3:>13.1f}{tl['comm_s'] / p.time_s:>13.2f}"
              f"{tl['comm_s'] / (p.time_s - credit):>22.2f}")


if __name__ == "__main__":
    sys.exit(main())
