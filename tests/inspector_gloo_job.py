"""A small job on 2 gloo ranks that writes what NCCL Inspector would: one v4.2 JSON line per call per rank.

    python tests/inspector_gloo_job.py OUTDIR --slow-op all_gather --slow-factor 10

gloo runs no NCCL, so no profiler plugin can see these calls: this script times each call itself (wall
clock around the blocking call, `coll_timing_source` "host_wall", not the plugin's "kernel_gpu") and writes
the Inspector's fields with its conventions (per-rank size for AllGather, its algbw/busbw formulas). The same
timed calls are written twice: OUTDIR/asis as timed, and OUTDIR/slowed with --slow-op's times multiplied by
--slow-factor on purpose, for the test that jobfit reports that op short (and the rest as before).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

SIZES = (4 << 20, 16 << 20)  # S of the whole buffer (all-gather: the gathered output), as fabricbench sweeps it
CALLS, WARMUP = 12, 4


def rank_main(rank: int, world: int, store: str, out: str, slow_op: str | None, factor: float) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    host, pid = socket.gethostname(), os.getpid()
    lines, slowed = [], []
    sn = {"AllReduce": 0, "AllGather": 0}
    for coll, op in (("AllReduce", "all_reduce"), ("AllGather", "all_gather")):
        for s in SIZES:
            per_rank = s // world if op == "all_gather" else s
            x = torch.randn(per_rank // 4)
            out_t = torch.empty(s // 4)
            for i in range(WARMUP + CALLS):
                dist.barrier()
                t0 = time.perf_counter()
                if op == "all_reduce":
                    dist.all_reduce(x)
                else:
                    dist.all_gather_into_tensor(out_t, x)  # what fabricbench's torch engine calls
                t = (time.perf_counter() - t0) * 1e6
                if i < WARMUP:
                    continue
                sn[coll] += 1
                lines.append(line(coll, op, sn[coll], per_rank, t, rank, world, host, pid))
                slowed.append(line(coll, op, sn[coll], per_rank, t * (factor if op == slow_op else 1.0), rank, world,
                                   host, pid))
    for sub, recs in (("asis", lines), ("slowed", slowed)):
        with open(os.path.join(out, sub, f"{host}-pid{pid}.log"), "w") as fh:
            fh.write("".join(json.dumps(x) + "\n" for x in recs))
    dist.destroy_process_group()


def line(coll, op, sn, per_rank, t, rank, world, host, pid):
    traffic = per_rank * world if op == "all_gather" else per_rank  # the Inspector's own formula
    algbw = traffic / 1e9 / (t / 1e6)
    bus = algbw * (2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world)
    return {"header": {"id": "0xfab1c", "comm_name": "gloo lab", "rank": rank, "n_ranks": world, "nnodes": 1},
            "metadata": {"inspector_output_format_version": "v4.2", "dump_timestamp_us": int(time.time() * 1e6),
                         "hostname": host, "pid": pid},
            "coll_perf": {"coll": coll, "coll_sn": sn, "coll_msg_size_bytes": per_rank,
                          "coll_exec_time_us": round(t, 3), "coll_timing_source": "host_wall",
                          "coll_algobw_gbs": algbw, "coll_busbw_gbs": bus}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--slow-op", default=None)
    ap.add_argument("--slow-factor", type=float, default=1.0)
    a = ap.parse_args()
    import torch.multiprocessing as mp

    for sub in ("asis", "slowed"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    store = os.path.join(a.out, ".store")
    mp.spawn(rank_main, args=(2, store, a.out, a.slow_op, a.slow_factor), nprocs=2, join=True)
    os.remove(store) if os.path.exists(store) else None
    sys.exit(0)


if __name__ == "__main__":
    main()
