"""Where does relate's bias at mild fabrics come from? Three probes, each isolating one candidate cause, on
2 gloo ranks in a shaped namespace (fabricbench/fabrics/shaped.py), in the style of credit_probe.py
(the fourth candidate, the link credit, is that probe's and is priced: relating/credit.py).

    python3 benchmarks/relate/bias_probe.py                          # 1gbit and 300mbit, S = 1.5 MiB
    python3 benchmarks/relate/bias_probe.py --rates default,2gbit    # the unshaped loopback and a mild rate
    python3 benchmarks/relate/bias_probe.py --rates 1gbit --size 2621440 --split 3 --iters 10

relate prices a step's communication as Σ calls × t(S), t the sweep's time for one call of S run back to
back in a process that does nothing else. Each probe times what training does differently, all calls
back to back (no idle gap, so no link credit), the ranks single-threaded as train's are (OMP_NUM_THREADS=1):
- in flight: S sent as `split` all-reduces of S/split issued at once (async, as DDP's buckets are) against
  the same calls one after the other (what the sum prices) and one call of S;
- contention: one async all-reduce of S alone, against the same call while the issuing thread computes
  (matmuls, as backward does) until it completes; its duration is from issue to the Work's future
  completing (a callback on gloo's thread), so the compute's own time is not in it;
- process state: one call of S back to back in the fresh process (a sweep's state), against the same
  after three training steps of a small model (fwd, bwd, AdamW), in the same process.
Prints, per rate and probe, the two medians, their ratio and the ratio's spread (the quartiles of the
per-iteration ratio: each iteration times both sides back to back, so the machine's drift cancels), and
writes the rows as JSON lines with --out. Needs root and iproute2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def worker(rank: int, size: int, split: int, iters: int, port: int, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # train's ranks: OMP_NUM_THREADS=1 (training/launch.py)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.ones(size // 4)
    parts = [torch.ones(size // 4 // split) for _ in range(split)]
    a = torch.randn(192, 192)

    def one():
        dist.all_reduce(x)

    def sequential():
        for p in parts:
            dist.all_reduce(p)

    def in_flight():
        for w in [dist.all_reduce(p, async_op=True) for p in parts]:
            w.wait()

    def completion(compute: bool) -> float:
        done: list[float] = []
        dist.barrier()
        t0 = time.perf_counter()
        work = dist.all_reduce(x, async_op=True)
        work.get_future().then(lambda f: done.append(time.perf_counter()))
        b = a
        while compute and not done:
            b = torch.mm(b, a).clamp_(-1.0, 1.0)
        work.wait()
        while not done:  # the callback runs on gloo's thread right after completion
            time.sleep(1e-4)
        return done[0] - t0

    rows: dict[str, list[tuple[float, float]]] = {"in flight": [], "contention": [], "process state": []}
    fresh = [_timed(one) for _ in range(iters + 2)][2:]  # a sweep's state: nothing else ran in this process
    for i in range(iters + 2):
        pair = (_timed(sequential), _timed(in_flight))
        if i >= 2:
            rows["in flight"].append(pair)
    singles = [_timed(one) for _ in range(iters)]
    for i in range(iters + 2):
        pair = (completion(False), completion(True))
        if i >= 2:
            rows["contention"].append(pair)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(3):
        model(torch.randn(512, 256)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    after = [_timed(one) for _ in range(iters)]
    rows["process state"] = list(zip(fresh, after))
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "one": statistics.median(singles)}, fh)


def ranks(size: int, split: int, iters: int, out_path: str) -> None:
    """Both ranks, in this process's network namespace (the parent started us inside the shaped one)."""
    import torch.multiprocessing as mp

    port = 29000 + os.getpid() % 2000
    mp.start_processes(worker, args=(size, split, iters, port, out_path), nprocs=2, start_method="spawn")


LABELS = {"in flight": ("sequential", "in flight"), "contention": ("alone", "beside compute"),
          "process state": ("fresh", "after training")}


def summarize(rate: str, got: dict) -> list[dict]:
    out = []
    for probe, pairs in got["rows"].items():
        base, other = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        ratios = sorted(p[1] / p[0] for p in pairs)
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
        out.append({"rate": rate, "probe": probe, "base": LABELS[probe][0], "other": LABELS[probe][1],
                    "base_s": base, "other_s": other, "ratio": q[1], "ratio_q1": q[0], "ratio_q3": q[2],
                    "one_call_s": got["one"], "iters": len(pairs)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1gbit,300mbit")
    ap.add_argument("--size", type=int, default=1572864, help="S in bytes (all-reduce of float32)")
    ap.add_argument("--split", type=int, default=3, help="calls S is split into for the in-flight probe")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    ap.add_argument("--ranks-out", default=None, help=argparse.SUPPRESS)  # the child's role
    a = ap.parse_args()
    if a.ranks_out:
        ranks(a.size, a.split, a.iters, a.ranks_out)
        return 0

    from fabricbench.fabrics import get_fabric

    rows = []
    print(f"S = {a.size} B, split {a.split}, {a.iters} iterations; ratio = other / base, median [quartiles] of "
          f"the per-iteration ratio")
    print(f"{'rate':>8} {'probe':<14}{'base':>12}{'ms':>8}{'other':>16}{'ms':>8}{'ratio':>8}{'[q1-q3]':>14}")
    for rate in a.rates.split(","):
        fab = get_fabric("default" if rate == "default" else f"shaped:{rate}")
        why = fab.unavailable()
        if why:
            print(f"{fab.name}: waived ({why})")
            continue
        out_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"relate-bias-{os.getpid()}.json")
        with fab.isolation() as ns:  # default: no namespace (ns None), the host's loopback
            cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [
                sys.executable, __file__, "--size", str(a.size), "--split", str(a.split), "--iters", str(a.iters),
                "--ranks-out", out_path]
            env = dict(os.environ, **fab.variables, OMP_NUM_THREADS="1")
            subprocess.run(cmd, check=True, timeout=600, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out_path, encoding="utf-8") as fh:
            got = json.load(fh)
        os.unlink(out_path)
        for r in summarize(rate, got):
            rows.append(r)
            spread = f"[{r['ratio_q1']:.3f}-{r['ratio_q3']:.3f}]"
            print(f"{rate:>8} {r['probe']:<14}{r['base']:>12}{r['base_s'] * 1e3:>8.2f}{r['other']:>16}"
                  f"{r['other_s'] * 1e3:>8.2f}{r['ratio']:>8.3f}{spread:>14}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
