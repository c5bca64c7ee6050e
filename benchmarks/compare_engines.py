"""Native engine vs torch engine (vs nccl-tests, if you point at its binaries) on the same GPUs, one run.

    python benchmarks/compare_engines.py --gpus 0 --out engines.jsonl
    python benchmarks/compare_engines.py --gpus 0-7 --nccl-tests /opt/nccl-tests/build

Prints per op and size the median time of each engine and the ratios torch/native and
nccl-tests/native, then the issue's one-H200 targets: all_reduce at 8 B <= 7 us eager and <= 1.5 us in
graph mode, and >= 2100 GB/s algbw (S / t, decimal) at 8 GiB out-of-place.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from fabricbench.measuring.api import make_config
from fabricbench.measuring.runner import run_sweep
from fabricbench.results.writer import ResultWriter
from fabricbench.sizes import format_size

NCCL_TESTS_BIN = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
                  "reduce_scatter": "reduce_scatter_perf"}
TARGETS = {"eager_8B_us": 7.0, "graph_8B_us": 1.5, "algbw_8GiB_gbps": 2100.0}


def nccl_tests(bin_dir: Path, op: str, gpus: list[int], lo: int, hi: int, iters: int) -> dict[int, float]:
    """nccl-tests' out-of-place time per size (its mean over `iters` launches), in us."""
    exe = bin_dir / NCCL_TESTS_BIN[op]
    if not exe.exists():
        return {}
    cmd = [str(exe), "-b", str(lo), "-e", str(hi), "-f", "2", "-g", str(len(gpus)), "-n", str(iters), "-w", "5"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200).stdout
    rows: dict[int, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].isdigit() and re.match(r"^[\d.]+$", parts[5]):
            rows[int(parts[0])] = float(parts[5])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--sizes", default="8-8G:x8")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--nccl-tests", type=Path, default=None, help="folder with all_reduce_perf etc.")
    ap.add_argument("--out", default=None, help="JSONL of every record")
    args = ap.parse_args()

    writer = ResultWriter(args.out)
    common = dict(gpus=args.gpus, ops=args.ops, sizes=args.sizes, iters=args.iters, warmup=5)
    ngpus = len(make_config(**common).gpus)
    # Both placements on the native side: torch.distributed's all_reduce and broadcast are in-place only,
    # so those rows compare against the native engine's in-place run (on one rank both are no-ops).
    native = run_sweep(make_config(engine="native", inplace="both", **common), writer=writer)
    graph = run_sweep(make_config(engine="native", graph=True, **{**common, "sizes": "8,1K,64K"}), writer=writer)
    torch_cfg = make_config(engine="torch", backend="nccl", nprocs=ngpus if ngpus > 1 else None, **common)
    torch_res = run_sweep(torch_cfg, writer=writer)
    writer.close()

    def by(rs, inplace=False):
        return {(r.op, r.bytes): r for r in rs if r.time_us is not None and r.inplace == inplace}

    n, n_in, g = by(native), by(native, True), by(graph)
    t = {(r.op, r.bytes): r for r in torch_res if r.time_us is not None}
    torch_inplace = {op for (op, _), r in t.items() if r.extra.get("torch_inplace")}
    sizes = sorted({b for _, b in n})
    nt: dict[tuple[str, int], float] = {}
    if args.nccl_tests:
        if not args.nccl_tests.is_dir():
            print(f"Error: --nccl-tests {args.nccl_tests}: not a folder", file=sys.stderr)
            return 2
        for op in args.ops.split(","):
            for size, us in nccl_tests(args.nccl_tests, op, make_config(**common).gpus, min(sizes), max(sizes),
                                       args.iters).items():
                nt[(op, size)] = us
    hdr = f"{'op':15s} {'place':5s} {'size':>6s} {'native us':>11s} {'graph(out)':>10s} {'torch us':>11s} {'torch/nat':>9s}"
    hdr += f" {'nccl-tests us':>13s} {'nt/nat':>7s}" if nt else ""
    hdr += f" {'native algbw':>12s} {'torch algbw':>11s}"
    print(hdr)
    for (op, size), r_out in sorted(n.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        tr = t.get((op, size))
        r = n_in.get((op, size), r_out) if op in torch_inplace else r_out
        gr = g.get((op, size))
        line = (f"{op:15s} {'in' if r.inplace else 'out':5s} {format_size(size):>6s} {r.time_us:11.2f} {gr.time_us if gr else float('nan'):10.2f} "
                f"{tr.time_us if tr else float('nan'):11.2f} "
                f"{(tr.time_us / r.time_us) if tr else float('nan'):9.2f}")
        if nt:
            v = nt.get((op, size))
            line += f" {v if v else float('nan'):13.2f} {(v / r.time_us) if v else float('nan'):7.2f}"
        line += f" {r.algbw_gbps:12.1f} {tr.algbw_gbps if tr else float('nan'):11.1f}"
        print(line)
    summary = {}
    print("torch.distributed has no out-of-place all_reduce/broadcast: those rows pair with native in-place")
    ar8 = n.get(("all_reduce", 8))
    ar8g = g.get(("all_reduce", 8))
    big = n.get(("all_reduce", 8 << 30))
    if ar8:
        summary["eager_8B_us"] = ar8.time_us
    if ar8g:
        summary["graph_8B_us"] = ar8g.time_us
    if big:
        summary["algbw_8GiB_gbps"] = big.algbw_gbps
    for k, v in summary.items():
        target = TARGETS[k]
        ok = v >= target if k.startswith("algbw") else v <= target
        print(f"target {k}: {v:.2f} ({'<=' if not k.startswith('algbw') else '>='} {target}) "
              f"{'PASS' if ok else 'MISS'}")
    print(json.dumps({"gpus": args.gpus, "summary": summary,
                      "torch_all_gather_8B_us": t.get(("all_gather", 8)).time_us if t.get(("all_gather", 8)) else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
