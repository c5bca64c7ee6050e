"""Does a shaped link bank credit while idle? One collective timed back to back (as a sweep runs it) and
after an idle gap (as a training step's collectives follow compute), on N gloo ranks in a shaped
namespace (fabricbench/fabrics/shaped.py: tc tbf, burst BURST_BYTES).

    python3 benchmarks/relate/credit_probe.py                          # 1gbit and 200mbit, gaps 0, 5, 20 ms
    python3 benchmarks/relate/credit_probe.py --rates 300mbit --sizes 524288 --gaps 0,0.02 --iters 10
    python3 benchmarks/relate/credit_probe.py --op all_gather --nranks 3 --dtype bfloat16   # FSDP's calls

With a gap the ranks meet at a barrier (a few bytes) and then all sleep it, so each call starts after the
same idle time on every rank; the figure is the slowest rank's median call (what a step pays).

A token bucket of B bytes refilled at R while the link idles predicts the saving per call:
min(B / R, gap) (relate's link credit, fabricbench/relating/credit.py). Prints one line per (rate, size,
gap): the median call, the saving against back to back, and that prediction. Needs root and iproute2.
The gap is a sleep, so the ranks compete for no core during it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def worker(rank: int, nranks: int, op: str, dtype: str, sizes: list[int], gaps: list[float], iters: int,
           port: int, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks)
    dt = getattr(torch, dtype)
    rows = []
    for s in sizes:  # S as nccl-tests counts it: the all-reduced buffer, the gathered output
        numel = s // dt.itemsize // nranks * nranks
        if op == "all_gather":
            x, y = torch.ones(numel // nranks, dtype=dt), torch.empty(numel, dtype=dt)

            def call():
                dist.all_gather_into_tensor(y, x)
        else:
            x = torch.ones(numel, dtype=dt)

            def call():
                dist.all_reduce(x)
        for g in gaps:
            ts = []
            for _ in range(iters + 2):  # 2 warm-up calls
                if g:
                    dist.barrier()
                    time.sleep(g)
                t0 = time.perf_counter()
                call()
                ts.append(time.perf_counter() - t0)
            mine = torch.tensor([statistics.median(ts[2:])], dtype=torch.float64)
            every = [torch.zeros(1, dtype=torch.float64) for _ in range(nranks)]
            dist.all_gather(every, mine)
            rows.append({"bytes": s, "gap_s": g, "time_s": max(float(t) for t in every)})
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump(rows, fh)


def ranks(nranks: int, op: str, dtype: str, sizes: list[int], gaps: list[float], iters: int, out_path: str) -> None:
    """Every rank, in this process's network namespace (the parent started us inside the shaped one)."""
    import torch.multiprocessing as mp

    port = 29000 + os.getpid() % 2000
    mp.start_processes(worker, args=(nranks, op, dtype, sizes, gaps, iters, port, out_path), nprocs=nranks,
                       start_method="spawn")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1gbit,200mbit")
    ap.add_argument("--sizes", default="524288,1509376", help="S in bytes, comma list")
    ap.add_argument("--op", choices=("all_reduce", "all_gather"), default="all_reduce")
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--gaps", default="0,0.005,0.02", help="idle seconds before each call, comma list")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    ap.add_argument("--ranks-out", default=None, help=argparse.SUPPRESS)  # the child's role
    a = ap.parse_args()
    sizes = [int(v) for v in a.sizes.split(",")]
    gaps = [float(v) for v in a.gaps.split(",")]
    if a.nranks < 2:
        ap.error("--nranks takes 2 or more")
    if a.ranks_out:
        ranks(a.nranks, a.op, a.dtype, sizes, gaps, a.iters, a.ranks_out)
        return 0

    from fabricbench.fabrics import get_fabric
    from fabricbench.fabrics.shaped import BURST_BYTES

    rows = []
    print(f"# {a.op} {a.dtype} on {a.nranks} gloo ranks; the prediction is relate's credit per call")
    print(f"{'rate':>8}{'S':>10}{'gap ms':>8}{'call ms':>9}{'saved ms':>10}{'min(B/R, gap) ms':>18}")
    for rate in a.rates.split(","):
        fab = get_fabric(f"shaped:{rate}")
        why = fab.unavailable()
        if why:
            print(f"shaped:{rate}: waived ({why})")
            continue
        bucket = BURST_BYTES * 8 / fab.rate_bps
        out_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"relate-credit-{os.getpid()}.json")
        with fab.isolation() as ns:
            cmd = ["ip", "netns", "exec", ns, sys.executable, __file__, "--sizes", a.sizes, "--gaps", a.gaps,
                   "--iters", str(a.iters), "--op", a.op, "--nranks", str(a.nranks), "--dtype", a.dtype,
                   "--ranks-out", out_path]
            env = dict(os.environ, **fab.variables)
            subprocess.run(cmd, check=True, timeout=600, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out_path, encoding="utf-8") as fh:
            got = json.load(fh)
        os.unlink(out_path)
        base = {r["bytes"]: r["time_s"] for r in got if r["gap_s"] == 0}
        for r in got:
            saved = base.get(r["bytes"], r["time_s"]) - r["time_s"]
            pred = min(bucket, r["gap_s"])
            rows.append({"rate": rate, "op": a.op, "nranks": a.nranks, "dtype": a.dtype, **r, "saved_s": saved,
                         "predicted_saved_s": pred, "bucket_s": bucket})
            print(f"{rate:>8}{r['bytes']:>10}{r['gap_s'] * 1e3:>8.0f}{r['time_s'] * 1e3:>9.2f}{saved * 1e3:>10.2f}"
                  f"{pred * 1e3:>18.2f}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
