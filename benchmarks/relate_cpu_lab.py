"""The CPU fabric lab at a larger scale: more fabrics, strategies and steps than the CI test, then the
predicted/observed table of `fabricbench relate`.

    python3 benchmarks/relate_cpu_lab.py                       # default fabrics, ddp,zero3,fsdp
    python3 benchmarks/relate_cpu_lab.py --fabrics default,shaped:4gbit,shaped:1gbit,shaped:250mbit \
        --strategies ddp,zero1,zero2,zero3,fsdp --steps 10 --out lab/records.jsonl --plot lab/relate.png

Needs root and iproute2 (shaped fabrics are tc-limited loopbacks of network namespaces; without them they
are waived and only the default fabric runs), torch and accelerate (the `train` extra; DeepSpeed for
ZeRO). The records file keeps everything, so `fabricbench relate FILE` redoes the table without measuring.
Prints one line per part with its seconds, the table, and a summary line: the largest |residual| per
strategy over the non-reference fabrics.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()

    import fabricbench
    from fabricbench.relating.format import render
    from fabricbench.relating.lab import LabConfig, run_lab

    out = args.out or os.path.join(tempfile.mkdtemp(prefix="fabricbench-lab-"), "records.jsonl")
    fabrics = [f.strip() for f in args.fabrics.split(",") if f.strip()]
    config = LabConfig(fabrics=fabrics, strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
                       model=args.model, out=out, nprocs=args.nprocs, steps=args.steps,
                       warmup_steps=args.warmup_steps, batch_size=args.batch_size, seq_len=args.seq_len,
                       sweep_iters=args.sweep_iters, repeats=args.repeats)
    t0 = time.monotonic()
    run = run_lab(config, log=lambda m: print(m, flush=True))
    print(f"lab: {time.monotonic() - t0:.0f} s in all; records {out}")
    for fab, why in run.waived.items():
        print(f"waived {fab}: {why}")
    res = fabricbench.relate([out], reference=fabrics[0])
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
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
